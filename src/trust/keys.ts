import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { ConfigError } from '../errors.js';

/*
 * The text forms of the keys, each fit for one environment variable: `<keyId>:<base64>`. A signing key is an Ed25519
 * private key (PKCS#8 DER), a public key its SubjectPublicKeyInfo (DER), an encryption key 32 random bytes. Lists
 * separate keys with commas. The key id travels with every signature, so a worker finds the key to check it with
 * and an operator sees which key signed what.
 */

export const SIGNING_KEY_VARIABLE = 'AGENT_PIPELINE_SIGNING_KEY';
export const TRUSTED_KEYS_VARIABLE = 'AGENT_PIPELINE_TRUSTED_KEYS';
export const DECISION_KEYS_VARIABLE = 'AGENT_PIPELINE_DECISION_KEYS';
export { ENCRYPTION_KEY_VARIABLE } from '../codec/encryption-key.js';
import { BASE64, KEY_ID } from '../codec/encryption-key.js';

/** A private key that signs runs and decisions. */
export interface SigningKey {
  keyId: string;
  privateKey: KeyObject;
}

/** Splits `<keyId>:<base64>`, naming the variable and what is wrong. */
function splitKey(text: string, variable: string, what: string): { keyId: string; der: Buffer } {
  const at = text.indexOf(':');
  const keyId = at < 0 ? '' : text.slice(0, at).trim();
  const data = at < 0 ? '' : text.slice(at + 1).trim();
  // The value itself is never quoted back: it may be a private key.
  if (!KEY_ID.test(keyId) || !BASE64.test(data)) {
    throw new ConfigError(`[CONFIG_INVALID] ${variable}: a ${what} is written <keyId>:<base64> (key id of letters, digits, . _ -); generate one with \`agent-pipeline keys generate\``);
  }
  return { keyId, der: Buffer.from(data, 'base64') };
}

/** Reads `AGENT_PIPELINE_SIGNING_KEY`'s form. @throws ConfigError naming the variable and the fix */
export function parseSigningKey(text: string, variable = SIGNING_KEY_VARIABLE): SigningKey {
  const { keyId, der } = splitKey(text.trim(), variable, 'signing key');
  try {
    const privateKey = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
    if (privateKey.asymmetricKeyType !== 'ed25519') throw new Error(`a ${privateKey.asymmetricKeyType} key`);
    return { keyId, privateKey };
  } catch (err) {
    throw new ConfigError(`[CONFIG_INVALID] ${variable}: key ${keyId} is not an Ed25519 private key (${(err as Error).message}); generate one with \`agent-pipeline keys generate signing\``);
  }
}

/** Reads a comma-separated list of public keys (`AGENT_PIPELINE_TRUSTED_KEYS`). @throws ConfigError naming the key */
export function parsePublicKeys(text: string, variable: string): Map<string, KeyObject> {
  const keys = new Map<string, KeyObject>();
  for (const entry of text.split(',').map((e) => e.trim()).filter(Boolean)) {
    const { keyId, der } = splitKey(entry, variable, 'public key');
    if (keys.has(keyId)) throw new ConfigError(`[CONFIG_INVALID] ${variable}: key id ${keyId} is listed twice; give each key its own id`);
    try {
      const publicKey = createPublicKey({ key: der, format: 'der', type: 'spki' });
      if (publicKey.asymmetricKeyType !== 'ed25519') throw new Error(`a ${publicKey.asymmetricKeyType} key`);
      keys.set(keyId, publicKey);
    } catch (err) {
      throw new ConfigError(`[CONFIG_INVALID] ${variable}: key ${keyId} is not an Ed25519 public key (${(err as Error).message}); copy the public line \`agent-pipeline keys generate signing\` printed`);
    }
  }
  return keys;
}

/** The public half of a signing key, in the form the key lists take. */
export function publicKeyLine(key: SigningKey): string {
  return `${key.keyId}:${createPublicKey(key.privateKey).export({ format: 'der', type: 'spki' }).toString('base64')}`;
}

/** A key id for a new key: the date and a few random characters, so keys made on one day still differ. */
export function newKeyId(prefix: string, now = new Date()): string {
  return `${prefix}-${now.toISOString().slice(0, 10).replaceAll('-', '')}-${randomBytes(3).toString('hex')}`;
}

/** Checks a key id given on the command line. @throws ConfigError */
export function checkKeyId(keyId: string): string {
  if (!KEY_ID.test(keyId)) throw new ConfigError(`[CONFIG_INVALID] --id ${JSON.stringify(keyId)}: a key id is 1 to 64 letters, digits, dots, dashes or underscores`);
  return keyId;
}

/** A new Ed25519 key pair: the private line to set in AGENT_PIPELINE_SIGNING_KEY, the public line to trust. */
export function generateSigningKey(keyId: string): { privateLine: string; publicLine: string } {
  const { privateKey } = generateKeyPairSync('ed25519');
  const der = privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64');
  return { privateLine: `${keyId}:${der}`, publicLine: publicKeyLine({ keyId, privateKey }) };
}

/** A new 256-bit encryption key in AGENT_PIPELINE_ENCRYPTION_KEY's form. */
export function generateEncryptionKey(keyId: string): { line: string } {
  return { line: `${keyId}:${randomBytes(32).toString('base64')}` };
}
