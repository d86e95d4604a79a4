import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FileStore } from '../../src/store/file-store.js';
import { StoreObjectTooLargeError } from '../../src/store/object-store.js';

let root: string;
let store: FileStore;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'file-store-'));
  store = new FileStore(path.join(root, 'store'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('FileStore', () => {
  test('puts, gets, lists and deletes objects by prefix', async () => {
    await store.put('runs/a/one', Buffer.from('1'));
    await store.put('runs/a/two', Buffer.from('22'));
    await store.put('runs/b/one', Buffer.from('3'));
    expect(Buffer.from((await store.get('runs/a/two', 10))!).toString()).toBe('22');
    expect(await store.get('runs/a/none', 10)).toBeUndefined();
    const keys: string[] = [];
    for await (const key of store.list('runs/a/')) keys.push(key);
    expect(keys.sort()).toEqual(['runs/a/one', 'runs/a/two']);
    expect(await store.deletePrefix('runs/a/')).toBe(2);
    expect(await store.get('runs/a/one', 10)).toBeUndefined();
    expect(await store.get('runs/b/one', 10)).toBeDefined();
  });

  test('copies files in and out, and refuses objects over the reader\'s cap', async () => {
    const source = path.join(root, 'source.bin');
    await writeFile(source, Buffer.alloc(100, 7));
    await store.putFile('blobs/x', source);
    const target = path.join(root, 'target.bin');
    expect(await store.getFile('blobs/x', target, 100)).toBe(true);
    expect((await readFile(target)).length).toBe(100);
    await expect(store.getFile('blobs/x', target, 99)).rejects.toBeInstanceOf(StoreObjectTooLargeError);
    await expect(store.get('blobs/x', 99)).rejects.toBeInstanceOf(StoreObjectTooLargeError);
    expect(await store.getFile('blobs/none', target, 100)).toBe(false);
  });

  test('refuses keys that could leave the store, and objects that are links', async () => {
    for (const key of ['../x', 'a/../../x', '/abs', 'a//b', 'a/./b', 'a b']) {
      await expect(store.put(key, Buffer.from('x'))).rejects.toThrow('not a valid store key');
    }
    await symlink('/etc/passwd', path.join(root, 'store', 'link'));
    await expect(store.get('link', 1_000_000)).rejects.toThrow('not a regular file');
  });
});
