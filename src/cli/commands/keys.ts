import type { Command } from 'commander';
import { InvalidRequestError } from '../../errors.js';
import {
  checkKeyId,
  DECISION_KEYS_VARIABLE,
  ENCRYPTION_KEY_VARIABLE,
  generateEncryptionKey,
  generateSigningKey,
  newKeyId,
  SIGNING_KEY_VARIABLE,
  TRUSTED_KEYS_VARIABLE,
} from '../../trust/keys.js';
import { printJson, printLine } from '../output.js';
import { writePrivateKeyFile } from '../private-key-file.js';

interface KeysGenerateOptions {
  id?: string;
  out?: string;
  json?: boolean;
}

export function addKeysCommands(program: Command): void {
  const keys = program.command('keys').description('make the keys that sign runs and decisions, and encrypt run histories');
  keys
    .command('generate')
    .description('generate a key: prints the line to set where runs are started (and, for signing, the public key workers trust)')
    .argument('[kind]', 'signing (an Ed25519 key pair) or encryption (a 256-bit AES key)', 'signing')
    .option('--id <id>', 'the key id (letters, digits, . _ -) carried with every signature or ciphertext; default <kind>-<date>-<random>')
    .option('--out <file>', 'write the private line to FILE (mode 0600, never replacing a file) instead of printing it')
    .option('--json', 'print {"kind", "keyId", "variable", "privateKey" (absent with --out), "file", "publicKey"}')
    .addHelpText('after', '\nNeeds no Temporal server. Exit code: 0 generated, 2 bad kind, id or --out.\nKey handling (where each key lives, rotation): docs/security.md.')
    .action(async (kind: string, opts: KeysGenerateOptions) => {
      if (kind !== 'signing' && kind !== 'encryption') {
        throw new InvalidRequestError('INVALID_REQUEST', `[INVALID_REQUEST] keys generate ${kind}: the kind is signing or encryption`);
      }
      const keyId = opts.id === undefined ? newKeyId(kind === 'signing' ? 'sign' : 'enc') : checkKeyId(opts.id);
      const generated = kind === 'signing' ? generateSigningKey(keyId) : { ...generateEncryptionKey(keyId), publicLine: undefined };
      const privateLine = 'privateLine' in generated ? generated.privateLine : generated.line;
      const variable = kind === 'signing' ? SIGNING_KEY_VARIABLE : ENCRYPTION_KEY_VARIABLE;
      const file = opts.out ? await writePrivateKeyFile(opts.out, `${variable}="${privateLine}"\n`) : undefined;
      if (opts.json) {
        return printJson({ kind, keyId, variable, privateKey: file ? undefined : privateLine, file: file ?? null, publicKey: generated.publicLine ?? null });
      }
      printLine(file ? `Wrote ${variable} (key ${keyId}) to ${file} (mode 0600); keep it out of version control.` : `# Keep this line secret; set it where runs are started and decided:`);
      if (!file) printLine(`${variable}="${privateLine}"`);
      if (generated.publicLine) {
        printLine(`# On workers, trust it to start runs (and, unless ${DECISION_KEYS_VARIABLE} is set, to decide); append it after a comma to keep other keys:`);
        printLine(`${TRUSTED_KEYS_VARIABLE}="${generated.publicLine}"`);
      } else {
        printLine(`# Set the same key on every client and worker; to rotate, put a new key first and keep the old one after a comma.`);
      }
    });
}
