import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { parseEncryptionKeys } from '../../src/codec/encryption-key.js';
import { StoreDecryptionError } from '../../src/store/encrypted-store.js';
import { FileStore } from '../../src/store/file-store.js';
import { openStore } from '../../src/store/open-store.js';

const key = (id: string): string => `${id}:${randomBytes(32).toString('base64')}`;

describe('a store opened with AGENT_PIPELINE_ENCRYPTION_KEY', () => {
  let dir: string;
  const k1 = key('k1');
  const k2 = key('k2');
  const open = (keys: string) => openStore({ AGENT_PIPELINE_STORE: `file://${dir}/store` }, { defaultDir: dir, encryptionKeys: parseEncryptionKeys(keys) });

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'encrypted-store-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('writes ciphertext and reads back the plaintext, objects and files alike', async () => {
    const store = open(k1);
    await store.put('runs/r/a', Buffer.from('the secret plan'));
    const onDisk = await readFile(path.join(dir, 'store', 'runs', 'r', 'a'));
    expect(onDisk.toString('latin1')).not.toContain('the secret plan');
    expect(Buffer.from((await store.get('runs/r/a', 100))!).toString()).toBe('the secret plan');
    const bytes = Buffer.concat([Buffer.from('the secret bundle'), randomBytes(3 * 1024 * 1024)]);
    await writeFile(path.join(dir, 'in'), bytes);
    await store.putFile('runs/r/bundle', path.join(dir, 'in'));
    expect((await readFile(path.join(dir, 'store', 'runs', 'r', 'bundle'))).includes(Buffer.from('the secret bundle'))).toBe(false);
    expect(await store.getFile('runs/r/bundle', path.join(dir, 'out'), bytes.length)).toBe(true);
    expect((await readFile(path.join(dir, 'out'))).equals(bytes)).toBe(true);
    expect(await store.get('runs/r/none', 10)).toBeUndefined();
  });

  test('a rotated key list still reads what the old key wrote', async () => {
    await open(k1).put('runs/r/a', Buffer.from('old'));
    expect(Buffer.from((await open(`${k2},${k1}`).get('runs/r/a', 100))!).toString()).toBe('old');
  });

  test('refuses an altered object, one under another key, one moved to another key, and a plain one', async () => {
    const store = open(k1);
    await store.put('runs/r/a', Buffer.from('the secret plan'));
    const file = path.join(dir, 'store', 'runs', 'r', 'a');
    const sealed = await readFile(file);
    await expect(open(k2).get('runs/r/a', 100)).rejects.toThrow(/encrypted with key "k1", which AGENT_PIPELINE_ENCRYPTION_KEY does not hold/);
    await expect(open(`k1:${randomBytes(32).toString('base64')}`).get('runs/r/a', 100)).rejects.toThrow(StoreDecryptionError);
    const altered = Buffer.from(sealed);
    altered[altered.length - 20]! ^= 1;
    await writeFile(file, altered);
    await expect(store.get('runs/r/a', 100)).rejects.toThrow(/does not decrypt/);
    await expect(store.getFile('runs/r/a', path.join(dir, 'out'), 100)).rejects.toThrow(/does not decrypt/);
    await expect(readFile(path.join(dir, 'out'))).rejects.toThrow(/ENOENT/);
    // The same sealed bytes under another store key: bound to the key they were written for.
    await new FileStore(path.join(dir, 'store')).put('runs/r/b', sealed);
    await expect(store.get('runs/r/b', 100)).rejects.toThrow(/does not decrypt/);
    await new FileStore(path.join(dir, 'store')).put('runs/r/plain', Buffer.from('plain text here'));
    await expect(store.get('runs/r/plain', 100)).rejects.toThrow(/is not encrypted/);
  });
});
