import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { copyFile, lstat, mkdir, readdir, readFile, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { checkStoreKey, StoreObjectTooLargeError, type DeletePrefixOptions, type ObjectStore, type StoredObject } from './object-store.js';

/**
 * A store in a local folder (`file:///path`): what one machine needs, with nothing new to run. Objects are regular
 * files; writes go to a temp file in the same folder, then rename, so a reader never sees half an object.
 */
export class FileStore implements ObjectStore {
  readonly description: string;

  constructor(private readonly root: string) {
    this.description = `file://${root}`;
  }

  async put(key: string, body: Uint8Array): Promise<void> {
    await this.replace(key, (temp) => writeFile(temp, body, { flag: 'wx' }));
  }

  async putFile(key: string, file: string): Promise<void> {
    await this.replace(key, (temp) => copyFile(file, temp));
  }

  async get(key: string, maxBytes: number): Promise<Uint8Array | undefined> {
    const file = this.fileOf(key);
    const size = await regularFileSize(file);
    if (size === undefined) return undefined;
    if (size > maxBytes) throw new StoreObjectTooLargeError(`${key} is ${size} bytes, over the ${maxBytes} allowed`);
    return readFile(file);
  }

  async getFile(key: string, target: string, maxBytes: number): Promise<boolean> {
    const file = this.fileOf(key);
    const size = await regularFileSize(file);
    if (size === undefined) return false;
    if (size > maxBytes) throw new StoreObjectTooLargeError(`${key} is ${size} bytes, over the ${maxBytes} allowed`);
    const temp = `${target}.${randomUUID()}.tmp`;
    try {
      await pipeline(createReadStream(file), createWriteStream(temp, { flags: 'wx' }));
      await rename(temp, target);
    } finally {
      await rm(temp, { force: true });
    }
    return true;
  }

  async *list(prefix: string): AsyncIterable<string> {
    const entries = await readdir(this.root, { recursive: true, withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      if (!entry.isFile() || entry.name.endsWith('.tmp')) continue;
      const key = path.relative(this.root, path.join(entry.parentPath, entry.name)).split(path.sep).join('/');
      if (key.startsWith(prefix)) yield key;
    }
  }

  /** By the files' modification times: the clock of the file system's host (a shared volume's server). */
  async *listModified(prefix: string): AsyncIterable<StoredObject> {
    for await (const key of this.list(prefix)) {
      const modifiedMs = await this.modifiedMs(key);
      if (modifiedMs !== undefined) yield { key, modifiedMs };
    }
  }

  async deletePrefix(prefix: string, options: DeletePrefixOptions = {}): Promise<number> {
    const before = options.modifiedBeforeMs;
    let deleted = 0;
    for await (const key of this.list(prefix)) {
      // Written at or after `before`, or gone meanwhile: left alone.
      if (before !== undefined && !(((await this.modifiedMs(key)) ?? before) < before)) continue;
      await rm(this.fileOf(key), { force: true });
      deleted += 1;
    }
    // A folder prefix leaves no empty folders behind (a store of many runs would keep one per run); a folder that
    // something was written into meanwhile is not empty, and stays.
    if (prefix.endsWith('/')) await removeEmptyFolders(path.join(this.root, ...checkStoreKey(prefix.slice(0, -1)).split('/')));
    return deleted;
  }

  /** When the object's file was last written, or undefined when it is gone. */
  private async modifiedMs(key: string): Promise<number | undefined> {
    const stats = await lstat(this.fileOf(key)).catch(() => undefined);
    return stats?.isFile() ? stats.mtimeMs : undefined;
  }

  private fileOf(key: string): string {
    return path.join(this.root, ...checkStoreKey(key).split('/'));
  }

  private async replace(key: string, write: (temp: string) => Promise<void>): Promise<void> {
    const file = this.fileOf(key);
    await mkdir(path.dirname(file), { recursive: true });
    const temp = `${file}.${randomUUID()}.tmp`;
    try {
      await write(temp);
      await rename(temp, file);
    } finally {
      await rm(temp, { force: true });
    }
  }
}

/** The size of `file` when it is a regular file (never a link), undefined when it does not exist. */
async function regularFileSize(file: string): Promise<number | undefined> {
  const stats = await lstat(file).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return undefined;
    throw error;
  });
  if (stats === undefined) return undefined;
  if (!stats.isFile()) throw new Error(`${file} in the store is not a regular file`);
  return stats.size;
}

/** Removes `dir` and the folders below it that are empty, deepest first; anything holding a file stays. */
async function removeEmptyFolders(dir: string): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => undefined);
  if (!entries) return;
  for (const entry of entries) if (entry.isDirectory()) await removeEmptyFolders(path.join(dir, entry.name));
  await rmdir(dir).catch(() => undefined);
}
