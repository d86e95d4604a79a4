import { lstatSync } from 'node:fs';
import { lstat, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { readRegularFile, readRegularFileSync } from '../../files/regular-file.js';

/*
 * How the worker makes the folders and reads the small records it keeps for itself (bookkeeping, bundle markers)
 * without ever following a symlink. Those folders are out of agents' reach, but some of their content may come from
 * elsewhere (a run's old in-tree bookkeeping moved there, a shared volume): a symlink on the way is refused, never
 * written or read through, and a record is read only when it is a small regular file.
 */

/** Thrown when a folder the worker keeps its own files in is a symlink, or not a folder. */
export class OwnFolderError extends Error {
  override readonly name = 'OwnFolderError';
}

/** The most a record (run.json, ended.json, a bundle's marker) may hold. @unit bytes */
export const MAX_RECORD_BYTES = 1024 * 1024;

/**
 * `base/parts[0]/parts[1]/…` as a chain of real folders, each created when missing. Each is checked with `lstat`, so
 * a symlink anywhere below `base` is refused rather than followed. `base` itself is the operator's (the workspaces
 * root may be a symlink to a volume) and is not checked.
 * @throws OwnFolderError naming the path that is a symlink or not a folder
 */
export async function ensureRealDir(base: string, ...parts: string[]): Promise<string> {
  let dir = base;
  for (const part of parts) {
    if (part === '' || part === '.' || part === '..' || part.includes('/') || part.includes(path.sep)) {
      throw new OwnFolderError(`"${part}" is not a folder name (under ${dir})`);
    }
    dir = path.join(dir, part);
    await mkdir(dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    const info = await lstat(dir);
    if (!info.isDirectory()) {
      const what = info.isSymbolicLink() ? 'a symlink' : 'not a folder';
      throw new OwnFolderError(`${dir} is ${what}; the worker never writes its own files through it (remove it, and find out what put it there)`);
    }
  }
  return dir;
}

/** Whether `dir` exists as a folder of its own (not a symlink to one). */
export async function isRealDir(dir: string): Promise<boolean> {
  return (await lstat(dir).catch(() => undefined))?.isDirectory() ?? false;
}

/** {@link isRealDir}, synchronous. */
export function isRealDirSync(dir: string): boolean {
  try {
    return lstatSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/** The content of `file` when it is a regular file (not a symlink) of at most `maxBytes`; otherwise `undefined`. */
export async function readOwnFile(file: string, maxBytes = MAX_RECORD_BYTES): Promise<Buffer | undefined> {
  return readRegularFile(file, { maxBytes }).catch(() => undefined);
}

/** {@link readOwnFile}, synchronous (for the run-folder lookup, which is). */
export function readOwnFileSync(file: string, maxBytes = MAX_RECORD_BYTES): Buffer | undefined {
  try {
    return readRegularFileSync(file, { maxBytes });
  } catch {
    return undefined;
  }
}

/** The JSON record in `file` (a small regular file, never through a symlink), or `undefined` when there is none. */
export function readRecordSync<T>(file: string): T | undefined {
  const data = readOwnFileSync(file);
  try {
    return data ? (JSON.parse(data.toString('utf8')) as T) : undefined;
  } catch {
    return undefined;
  }
}

/** {@link readRecordSync}, asynchronous. */
export async function readRecord<T>(file: string): Promise<T | undefined> {
  const data = await readOwnFile(file);
  try {
    return data ? (JSON.parse(data.toString('utf8')) as T) : undefined;
  } catch {
    return undefined;
  }
}
