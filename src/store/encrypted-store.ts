import { createCipheriv, createDecipheriv, createHmac, randomBytes, randomUUID, type CipherGCM, type DecipherGCM } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { DeletePrefixOptions, ObjectStore, StoredObject } from './object-store.js';

/*
 * Everything written to the store encrypted with the keys of `AGENT_PIPELINE_ENCRYPTION_KEY` (AES-256-GCM, as history
 * is): a bucket's reader without the key learns sizes and key names (hashes), nothing else. Each object is
 *   "APS1" | id length (1 byte) | key id | nonce (12) | ciphertext | tag (16)
 * encrypted with a key derived from the encryption key for this use alone, and authenticated together with its key id
 * and its store key, so an object copied to another key, or relabelled, does not decrypt. The first key encrypts,
 * every key decrypts: rotation works as it does for history.
 */

const MAGIC = Buffer.from('APS1');
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** One encryption key as codec/encryption-key.ts parses it. */
export interface StoreKey {
  id: string;
  key: Buffer;
}

/** Thrown when a stored object does not decrypt: another key, a relabelled or altered object, or one never encrypted. */
export class StoreDecryptionError extends Error {
  override readonly name = 'StoreDecryptionError';
}

/** The key an encryption key gives the store: its own, so store objects and payloads never share a key. */
function storeKeyOf(key: Buffer): Buffer {
  return createHmac('sha256', key).update('agent-pipeline/store-objects').digest();
}

export class EncryptedStore implements ObjectStore {
  readonly description: string;
  private readonly byId: ReadonlyMap<string, Buffer>;
  private readonly current: StoreKey;

  /** `keys[0]` encrypts; every key decrypts. */
  constructor(
    private readonly inner: ObjectStore,
    keys: readonly StoreKey[],
  ) {
    if (keys.length === 0) throw new TypeError('EncryptedStore needs at least one key');
    this.current = { id: keys[0]!.id, key: storeKeyOf(keys[0]!.key) };
    this.byId = new Map(keys.map((k) => [k.id, storeKeyOf(k.key)]));
    this.description = `${inner.description} (encrypted)`;
  }

  async put(key: string, body: Uint8Array): Promise<void> {
    const { header, cipher } = this.cipherFor(key);
    await this.inner.put(key, Buffer.concat([header, cipher.update(body), cipher.final(), cipher.getAuthTag()]));
  }

  async putFile(key: string, file: string): Promise<void> {
    const temp = `${file}.${randomUUID()}.sealed.tmp`;
    try {
      const { header, cipher } = this.cipherFor(key);
      const out = createWriteStream(temp, { flags: 'wx' });
      out.write(header);
      await pipeline(createReadStream(file), cipher, out, { end: false });
      out.end(cipher.getAuthTag());
      await new Promise<void>((resolve, reject) => out.once('close', resolve).once('error', reject));
      await this.inner.putFile(key, temp);
    } finally {
      await rm(temp, { force: true });
    }
  }

  async get(key: string, maxBytes: number): Promise<Uint8Array | undefined> {
    const sealed = await this.inner.get(key, maxBytes + MAGIC.length + 1 + 64 + NONCE_BYTES + TAG_BYTES);
    if (sealed === undefined) return undefined;
    const data = Buffer.from(sealed);
    const { decipher, start } = this.decipherFor(key, data.subarray(0, Math.min(data.length, MAGIC.length + 1 + 255 + NONCE_BYTES)));
    if (data.length < start + TAG_BYTES) throw this.broken(key);
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(data.subarray(start, data.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw this.broken(key);
    }
  }

  async getFile(key: string, target: string, maxBytes: number): Promise<boolean> {
    const sealed = `${target}.${randomUUID()}.sealed.tmp`;
    const plain = `${target}.${randomUUID()}.tmp`;
    try {
      if (!(await this.inner.getFile(key, sealed, maxBytes + MAGIC.length + 1 + 64 + NONCE_BYTES + TAG_BYTES))) return false;
      await this.decryptFile(key, sealed, plain);
      // Only a file whose tag verified is put in place: GCM hands out plaintext before it has checked it.
      await rename(plain, target);
      return true;
    } finally {
      await rm(sealed, { force: true });
      await rm(plain, { force: true });
    }
  }

  list(prefix: string): AsyncIterable<string> {
    return this.inner.list(prefix);
  }

  listModified(prefix: string): AsyncIterable<StoredObject> {
    return this.inner.listModified(prefix);
  }

  deletePrefix(prefix: string, options?: DeletePrefixOptions): Promise<number> {
    return this.inner.deletePrefix(prefix, options);
  }

  private async decryptFile(key: string, sealed: string, plain: string): Promise<void> {
    const handle = await open(sealed, 'r');
    let size: number;
    const head = Buffer.alloc(MAGIC.length + 1 + 255 + NONCE_BYTES);
    let headLength: number;
    const tag = Buffer.alloc(TAG_BYTES);
    try {
      size = (await handle.stat()).size;
      headLength = (await handle.read(head, 0, head.length, 0)).bytesRead;
      if (size >= TAG_BYTES) await handle.read(tag, 0, TAG_BYTES, size - TAG_BYTES);
    } finally {
      await handle.close();
    }
    const { decipher, start } = this.decipherFor(key, head.subarray(0, headLength));
    if (size < start + TAG_BYTES) throw this.broken(key);
    decipher.setAuthTag(tag);
    const checked = new Transform({
      transform: (chunk: Buffer, _encoding, done) => done(null, decipher.update(chunk)),
      flush: (done) => {
        try {
          done(null, decipher.final());
        } catch {
          done(this.broken(key));
        }
      },
    });
    await pipeline(createReadStream(sealed, { start, end: size - TAG_BYTES - 1 }), checked, createWriteStream(plain, { flags: 'wx' }));
  }

  private cipherFor(key: string): { header: Buffer; cipher: CipherGCM } {
    const id = Buffer.from(this.current.id, 'utf8');
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.current.key, nonce);
    cipher.setAAD(Buffer.from(`${this.current.id}\n${key}`, 'utf8'));
    return { header: Buffer.concat([MAGIC, Buffer.from([id.length]), id, nonce]), cipher };
  }

  /** The decipher for an object whose first bytes are `head`, and where its ciphertext starts. */
  private decipherFor(key: string, head: Buffer): { decipher: DecipherGCM; start: number } {
    if (head.length < MAGIC.length + 1 || !head.subarray(0, MAGIC.length).equals(MAGIC)) {
      throw new StoreDecryptionError(`${key} in the store is not encrypted, though AGENT_PIPELINE_ENCRYPTION_KEY is set: it was written without the key, or altered`);
    }
    const idLength = head[MAGIC.length]!;
    const start = MAGIC.length + 1 + idLength + NONCE_BYTES;
    if (head.length < start) throw this.broken(key);
    const id = head.subarray(MAGIC.length + 1, MAGIC.length + 1 + idLength).toString('utf8');
    const secret = this.byId.get(id);
    if (!secret) {
      throw new StoreDecryptionError(
        `${key} in the store is encrypted with key "${id}", which AGENT_PIPELINE_ENCRYPTION_KEY does not hold (it has ${[...this.byId.keys()].join(', ')}); add that key after the current one`,
      );
    }
    const decipher = createDecipheriv('aes-256-gcm', secret, head.subarray(start - NONCE_BYTES, start));
    decipher.setAAD(Buffer.from(`${id}\n${key}`, 'utf8'));
    return { decipher, start };
  }

  private broken(key: string): StoreDecryptionError {
    return new StoreDecryptionError(
      `${key} in the store does not decrypt: the key of its id in AGENT_PIPELINE_ENCRYPTION_KEY is not the one that encrypted it, or the object was altered`,
    );
  }
}
