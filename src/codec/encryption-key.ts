import { ConfigError } from '../errors.js';

/*
 * The keys of encrypted history. `AGENT_PIPELINE_ENCRYPTION_KEY="<keyId>:<base64 of 32 bytes>[,<keyId>:<base64>...]"`:
 * the first key encrypts, every key decrypts, so a new key goes first and the old one stays after it until no run
 * (and no retained history) needs it. `agent-pipeline keys generate` prints keys in this form.
 */

/** The variable that turns encryption on. */
export const ENCRYPTION_KEY_VARIABLE = 'AGENT_PIPELINE_ENCRYPTION_KEY';

/** AES-256 takes a 32-byte key. @unit bytes */
export const ENCRYPTION_KEY_BYTES = 32;

/** One key: the id written beside every payload it encrypts, and its bytes. */
export interface EncryptionKey {
  id: string;
  key: Buffer;
}

/** Key ids travel in payload metadata and in error messages: short and plain. */
export const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
export const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

const HOW_TO_FIX =
  `set ${ENCRYPTION_KEY_VARIABLE}="<keyId>:<base64 of 32 random bytes>" (several keys separated by ",", the first one encrypts), ` +
  'for example from `agent-pipeline keys generate`';

/**
 * The keys of `value` (the variable's content), first the one that encrypts. Messages name the variable and which
 * entry is wrong, never a key's bytes.
 * @throws ConfigError `CONFIG_INVALID`
 */
export function parseEncryptionKeys(value: string, variable = ENCRYPTION_KEY_VARIABLE): EncryptionKey[] {
  const entries = value.split(',').map((entry) => entry.trim());
  const invalid = (index: number, problem: string): ConfigError =>
    new ConfigError(`[CONFIG_INVALID] ${variable}: key ${index + 1} of ${entries.length} ${problem}; ${HOW_TO_FIX}`);
  const keys: EncryptionKey[] = [];
  entries.forEach((entry, index) => {
    const colon = entry.indexOf(':');
    if (colon < 0) throw invalid(index, 'is not <keyId>:<base64>');
    const id = entry.slice(0, colon);
    const encoded = entry.slice(colon + 1);
    if (!KEY_ID.test(id)) throw invalid(index, `has the id "${id.slice(0, 64)}", which is not 1 to 64 of A-Z a-z 0-9 . _ -`);
    const key = BASE64.test(encoded) ? Buffer.from(encoded, 'base64') : undefined;
    if (!key || key.length !== ENCRYPTION_KEY_BYTES) {
      throw invalid(index, `("${id}") is not the base64 of ${ENCRYPTION_KEY_BYTES} bytes${key ? ` (it decodes to ${key.length})` : ''}`);
    }
    if (keys.some((k) => k.id === id)) throw invalid(index, `repeats the id "${id}"; give each key its own id`);
    keys.push({ id, key });
  });
  return keys;
}

/** What to redact for the keys of `value`: the whole setting, each `<keyId>:<base64>` entry and each key's base64. */
export function encryptionSecretValues(value: string | undefined): string[] {
  if (!value?.trim()) return [];
  const entries = value.split(',').map((entry) => entry.trim()).filter(Boolean);
  const parts = entries.map((entry) => entry.slice(entry.indexOf(':') + 1));
  return [value, ...entries, ...parts.filter(Boolean)];
}
