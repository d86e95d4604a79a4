import type { Payload, PayloadCodec } from '@temporalio/common';
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { UNENCRYPTED_METADATA } from '../contracts/payload-origin.js';
import { ENCRYPTION_KEY_VARIABLE, type EncryptionKey } from './encryption-key.js';
import { payloadFromBytes, payloadToBytes } from './payload-bytes.js';

/*
 * AES-256-GCM over whole payloads. Encoding replaces a payload with one whose data is nonce, ciphertext and tag of the
 * original payload's protobuf bytes (its metadata too: `json/plain` says what the data was), and whose metadata names
 * only the encoding, the cipher and the key id. A payload not encrypted by this codec (written before encryption was
 * turned on, or by a namespace client without the key) decodes as it is, so a namespace can turn encryption on with
 * runs in flight and a stranger's plain message never fails a workflow task; it is marked as unencrypted in its
 * metadata, so that the messages only workers may send can be refused (contracts/payload-origin.ts).
 */

/** `metadata.encoding` of an encrypted payload, the value Temporal's samples use. */
export const ENCRYPTED_ENCODING = 'binary/encrypted';
export const KEY_ID_METADATA = 'encryption-key-id';
export const CIPHER_METADATA = 'encryption-cipher';
const CIPHER = 'AES-256-GCM';
/** GCM's standard nonce and its full tag. @unit bytes */
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

const text = (value: Uint8Array | undefined | null): string => (value ? Buffer.from(value).toString('utf8') : '');

/** Thrown when a payload cannot be decrypted: no key with its id, or a key whose bytes are not the ones that encrypted it. */
export class PayloadDecryptionError extends Error {
  override readonly name = 'PayloadDecryptionError';
}

export class EncryptionCodec implements PayloadCodec {
  private readonly byId: ReadonlyMap<string, Buffer>;
  private readonly current: EncryptionKey;

  /** `keys[0]` encrypts; every key decrypts. */
  constructor(keys: readonly EncryptionKey[]) {
    if (keys.length === 0) throw new TypeError('EncryptionCodec needs at least one key');
    this.current = keys[0]!;
    this.byId = new Map(keys.map((k) => [k.id, k.key]));
  }

  /** The id of the key new payloads are encrypted with. */
  get keyId(): string {
    return this.current.id;
  }

  /**
   * A key for another use than encryption (`purpose` names it), derived from each encryption key, the current one
   * first: what the key holders share, so that they can name things (lease workflow ids) that others cannot guess.
   */
  derivedKeys(purpose: string): Buffer[] {
    const keys = [this.current.key, ...[...this.byId.values()].filter((key) => key !== this.current.key)];
    return keys.map((key) => createHmac('sha256', key).update(`agent-pipeline/${purpose}`).digest());
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.encrypt(payload));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.decrypt(payload));
  }

  private encrypt(payload: Payload): Payload {
    const { id, key } = this.current;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, nonce);
    // The key id is authenticated too: a payload relabelled with another id does not decrypt.
    cipher.setAAD(Buffer.from(id, 'utf8'));
    const sealed = Buffer.concat([nonce, cipher.update(payloadToBytes(payload)), cipher.final(), cipher.getAuthTag()]);
    return {
      metadata: {
        encoding: Buffer.from(ENCRYPTED_ENCODING),
        [KEY_ID_METADATA]: Buffer.from(id),
        [CIPHER_METADATA]: Buffer.from(CIPHER),
      },
      data: sealed,
    };
  }

  private decrypt(payload: Payload): Payload {
    if (text(payload.metadata?.encoding) !== ENCRYPTED_ENCODING) return { ...payload, metadata: { ...payload.metadata, [UNENCRYPTED_METADATA]: Buffer.from('1') } };
    const id = text(payload.metadata?.[KEY_ID_METADATA]);
    const key = this.byId.get(id);
    if (!key) {
      throw new PayloadDecryptionError(
        `a payload is encrypted with key "${id}", which ${ENCRYPTION_KEY_VARIABLE} does not hold (it has ${[...this.byId.keys()].join(', ')}); ` +
          `add that key after the current one: ${ENCRYPTION_KEY_VARIABLE}="${this.current.id}:…,${id}:…"`,
      );
    }
    const data = payload.data ?? new Uint8Array(0);
    if (data.byteLength < NONCE_BYTES + TAG_BYTES) throw new PayloadDecryptionError(`a payload encrypted with key "${id}" is too short to hold nonce and tag`);
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, NONCE_BYTES));
      decipher.setAAD(Buffer.from(id, 'utf8'));
      decipher.setAuthTag(data.subarray(data.byteLength - TAG_BYTES));
      const decrypted = payloadFromBytes(Buffer.concat([decipher.update(data.subarray(NONCE_BYTES, data.byteLength - TAG_BYTES)), decipher.final()]));
      // It decrypted, so a key holder wrote it: a mark it carried inside (a decoded payload encrypted again) is void.
      delete decrypted.metadata?.[UNENCRYPTED_METADATA];
      return decrypted;
    } catch (err) {
      throw new PayloadDecryptionError(
        `a payload encrypted with key "${id}" does not decrypt: the key of that id in ${ENCRYPTION_KEY_VARIABLE} is not the one that encrypted it, or the payload was altered`,
        { cause: err },
      );
    }
  }
}
