import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseEncryptionKeys } from '../../src/codec/encryption-key.js';
import { StoreObjectTooLargeError, StoreUnavailableError, type ObjectStore } from '../../src/store/object-store.js';
import { openStore } from '../../src/store/open-store.js';
import { startVersitygw, versitygwOrSkip, type Versitygw } from '../helpers/versitygw.js';

/*
 * The `s3://` store against a real S3-compatible server (versitygw on a temp folder), opened from the settings a worker
 * reads: what an operator configures is what is tested.
 */

const binary = await versitygwOrSkip('the s3:// store tests');

async function all(keys: AsyncIterable<string>): Promise<string[]> {
  const list: string[] = [];
  for await (const key of keys) list.push(key);
  return list.sort();
}

describe.skipIf(!binary)('the s3:// store on versitygw', () => {
  let server: Versitygw;
  let store: ObjectStore;
  let dir: string;

  beforeAll(async () => {
    server = await startVersitygw(binary!);
    await server.createBucket('runs');
    dir = await mkdtemp(path.join(os.tmpdir(), 'store-s3-'));
    store = openStore(server.storeEnv('runs', 'team/a'), { defaultDir: dir });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('puts, gets, lists under the prefix and deletes a prefix', async () => {
    await store.put('runs/r1/a.json', Buffer.from('{"a":1}'));
    await store.put('runs/r1/b/c.bin', Buffer.from([0, 1, 2]));
    await store.put('runs/r2/d', Buffer.from('d'));
    expect(Buffer.from((await store.get('runs/r1/a.json', 1024))!).toString()).toBe('{"a":1}');
    expect(await store.get('runs/r1/missing', 1024)).toBeUndefined();
    expect(await all(store.list('runs/r1/'))).toEqual(['runs/r1/a.json', 'runs/r1/b/c.bin']);
    expect(await store.deletePrefix('runs/r1/')).toBe(2);
    expect(await all(store.list('runs/'))).toEqual(['runs/r2/d']);
    expect(store.description).toContain('s3://runs/team/a');
  });

  test('writes and reads a 20 MB file whole, and refuses an object over the reader\'s cap', async () => {
    const file = path.join(dir, 'big');
    const bytes = randomBytes(20 * 1024 * 1024);
    await writeFile(file, bytes);
    await store.putFile('runs/big/bundle', file);
    const target = path.join(dir, 'back');
    expect(await store.getFile('runs/big/bundle', target, 21 * 1024 * 1024)).toBe(true);
    expect((await readFile(target)).equals(bytes)).toBe(true);
    await expect(store.get('runs/big/bundle', 1024 * 1024)).rejects.toThrow(StoreObjectTooLargeError);
    await expect(store.getFile('runs/big/bundle', path.join(dir, 'capped'), 1024)).rejects.toThrow(StoreObjectTooLargeError);
    expect(await store.getFile('runs/big/none', path.join(dir, 'none'), 1024)).toBe(false);
  }, 60_000);

  test('wrong credentials fail as the store being unavailable, naming the settings to check', async () => {
    const wrong = openStore({ ...server.storeEnv('runs'), AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY: 'not-the-secret-0000' }, { defaultDir: dir });
    const failure = await wrong.put('runs/x', Buffer.from('x')).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(StoreUnavailableError);
    expect((failure as Error).message).toContain('AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY');
    expect((failure as Error).message).not.toContain('not-the-secret-0000');
  });

  test('a bucket that does not exist names AGENT_PIPELINE_STORE', async () => {
    const failure = await openStore(server.storeEnv('no-such-bucket'), { defaultDir: dir }).put('runs/x', Buffer.from('x')).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(StoreUnavailableError);
    expect((failure as Error).message).toMatch(/bucket in AGENT_PIPELINE_STORE/);
  });

  test('an endpoint nobody listens on fails as unavailable, naming AGENT_PIPELINE_STORE_ENDPOINT', async () => {
    const env = { ...server.storeEnv('runs'), AGENT_PIPELINE_STORE_ENDPOINT: 'http://127.0.0.1:9' };
    const failure = await openStore(env, { defaultDir: dir }).get('runs/x', 10).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(StoreUnavailableError);
    expect((failure as Error).message).toContain('AGENT_PIPELINE_STORE_ENDPOINT');
  }, 60_000);

  test('with AGENT_PIPELINE_ENCRYPTION_KEY the bucket holds ciphertext that reads back whole', async () => {
    const keys = parseEncryptionKeys(`k1:${randomBytes(32).toString('base64')}`);
    const sealed = openStore(server.storeEnv('runs', 'sealed'), { defaultDir: dir, encryptionKeys: keys });
    await sealed.put('runs/e/plan', Buffer.from('the secret plan'));
    const raw = await openStore(server.storeEnv('runs', 'sealed'), { defaultDir: dir }).get('runs/e/plan', 1024);
    expect(Buffer.from(raw!).toString('latin1')).not.toContain('the secret plan');
    expect(Buffer.from((await sealed.get('runs/e/plan', 1024))!).toString()).toBe('the secret plan');
  });
});
