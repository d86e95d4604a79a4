import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseEncryptionKeys } from '../../src/codec/encryption-key.js';
import { StoreObjectTooLargeError, StoreUnavailableError, type ObjectStore } from '../../src/store/object-store.js';
import { openStore } from '../../src/store/open-store.js';
import { checkStoreAtStart } from '../../src/worker/store.js';
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

  test('a worker\'s store waits out an outage: writes, reads and listings made while it is down finish once it is back', async () => {
    const reports: string[] = [];
    const waiting = openStore(server.storeEnv('runs', 'outage'), { defaultDir: dir, wait: { fallback: '1m', report: (m) => reports.push(m) } });
    await waiting.put('runs/o/before', Buffer.from('before'));
    const serveAgain = await server.outage();
    const during = Promise.all([waiting.put('runs/o/during', Buffer.from('during')), waiting.get('runs/o/before', 1024), all(waiting.list('runs/o/'))]);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    await serveAgain();
    const [, before, listed] = await during;
    expect(Buffer.from(before!).toString()).toBe('before');
    expect(listed).toContain('runs/o/before');
    expect(Buffer.from((await waiting.get('runs/o/during', 1024))!).toString()).toBe('during');
    // One report when the outage began, one when it ended, whatever the number of operations that met it.
    expect(reports).toHaveLength(2);
    expect(reports[0]).toMatch(/AGENT_PIPELINE_STORE_ENDPOINT.*waiting up to 1m00s for the store \(AGENT_PIPELINE_STORE_WAIT\)/);
    expect(reports[1]).toMatch(/answers again, after \d/);
  }, 60_000);

  test('an outage longer than AGENT_PIPELINE_STORE_WAIT fails, naming it; a refusal is not waited out', async () => {
    const env = { ...server.storeEnv('runs'), AGENT_PIPELINE_STORE_WAIT: '2s' };
    const serveAgain = await server.outage();
    try {
      const startedAt = Date.now();
      const failure = await openStore(env, { defaultDir: dir, wait: { fallback: '1m' } }).get('runs/x', 10).catch((err: unknown) => err);
      expect(failure).toBeInstanceOf(StoreUnavailableError);
      expect((failure as Error).message).toMatch(/after waiting 2\.0s for the store: AGENT_PIPELINE_STORE_WAIT/);
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(2_000);
    } finally {
      await serveAgain();
    }
    const wrong = openStore({ ...env, AGENT_PIPELINE_STORE_WAIT: '1m', AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY: 'not-the-secret-0000' }, { defaultDir: dir, wait: { fallback: '1m' } });
    const startedAt = Date.now();
    await expect(wrong.get('runs/x', 10)).rejects.toThrow(/AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY/);
    expect(Date.now() - startedAt).toBeLessThan(20_000);
    expect(() => openStore({ ...env, AGENT_PIPELINE_STORE_WAIT: 'soon' }, { defaultDir: dir })).toThrow(/AGENT_PIPELINE_STORE_WAIT: "soon" is not a duration; write it like 30s/);
  }, 60_000);

  test('a worker refuses to start on a store that refuses it, and starts with a warning when the store is only down', async () => {
    const refusing = openStore({ ...server.storeEnv('runs'), AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY: 'not-the-secret-0000' }, { defaultDir: dir, wait: { fallback: '1m' } });
    await expect(checkStoreAtStart(refusing, () => undefined)).rejects.toThrow(/^\[CONFIG_INVALID\] the object store .* failed to list runs\/: .*check AGENT_PIPELINE_STORE_ACCESS_KEY_ID/);
    await expect(checkStoreAtStart(openStore(server.storeEnv('no-such-bucket'), { defaultDir: dir }), () => undefined)).rejects.toThrow(/check the bucket in AGENT_PIPELINE_STORE/);
    const warnings: string[] = [];
    const serveAgain = await server.outage();
    try {
      await checkStoreAtStart(openStore(server.storeEnv('runs'), { defaultDir: dir, wait: { fallback: '1m' } }), (m) => warnings.push(m), 1_500);
    } finally {
      await serveAgain();
    }
    expect(warnings).toEqual([expect.stringMatching(/did not answer within 1\.5 s; the worker starts, and its runs wait for the store/)]);
    await checkStoreAtStart(store, (m) => warnings.push(m));
    expect(warnings).toHaveLength(1);
  }, 60_000);
});
