import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { open, readlink, realpath, type FileHandle } from 'node:fs/promises';
import { isInside } from './inside.js';

/*
 * How the worker (and the client) open a file whose path someone else controls: a run's workspace, its artifacts, its
 * bundle, a pipeline's folder, a repository's records. Whatever the path was when it was listed or checked, a process
 * running alongside may swap it since (a rename loop costs nothing), so every check is made on the handle opened:
 * - opened with O_NONBLOCK: opening a FIFO with no writer would otherwise wait for one, forever, on one of libuv's four
 *   threads (every file read of the process waits behind a few of those);
 * - opened with O_NOFOLLOW unless the caller follows symlinks on purpose: a symlink at the file itself is refused;
 * - then fstat on the handle: only a regular file is read (a device or a FIFO never ends), and only up to its size
 *   then, capped: a file that keeps growing is read no further than it was;
 * - with a root, the file opened must lie inside it, judged on the handle (Linux's /proc/self/fd): a folder on the way
 *   swapped for a symlink after a check of the path leads out only for the path, not for what was opened.
 */

/**
 * Thrown when the file opened is not a regular file (code `ENOTREG`), is larger than the cap (code `EFBIG`), or lies
 * outside the root it must be in (code `EOUTSIDE`).
 */
export class RegularFileError extends Error {
  override readonly name = 'RegularFileError';
  constructor(
    message: string,
    readonly code: 'ENOTREG' | 'EFBIG' | 'EOUTSIDE',
    /** The file's size, for `EFBIG`. @unit bytes */
    readonly bytes?: number,
  ) {
    super(message);
  }
}

/** Options of the functions of this module. */
export interface RegularFileOptions {
  /** Follow a symlink at the file itself (the caller checks where the opened file lies). @default false */
  follow?: boolean;
  /** Refuse (`EFBIG`) a file larger than this. @unit bytes @default no cap */
  maxBytes?: number;
  /** Refuse (`EOUTSIDE`) a file that, as opened, lies outside this folder once every symlink is followed. */
  inside?: string;
}

/** An open regular file and its size when it was opened. */
export interface OpenedFile {
  handle: FileHandle;
  /** @unit bytes */
  size: number;
}

function openFlags(options: RegularFileOptions): number {
  return constants.O_RDONLY | constants.O_NONBLOCK | (options.follow ? 0 : constants.O_NOFOLLOW);
}

function checkOpened(file: string, info: { isFile(): boolean; size: number }, options: RegularFileOptions): void {
  if (!info.isFile()) throw new RegularFileError(`${file} is not a regular file`, 'ENOTREG');
  if (options.maxBytes !== undefined && info.size > options.maxBytes) {
    throw new RegularFileError(`${file} is ${info.size} bytes, more than the cap of ${options.maxBytes} bytes`, 'EFBIG', info.size);
  }
}

/**
 * Opens `file` for reading as described above; the caller closes the handle.
 * @throws the file system's error (ENOENT, ELOOP for a symlink when not following…) or RegularFileError
 */
export async function openRegularFile(file: string, options: RegularFileOptions = {}): Promise<OpenedFile> {
  const handle = await open(file, openFlags(options));
  try {
    const info = await handle.stat();
    checkOpened(file, info, options);
    if (options.inside !== undefined) await refuseOutside(handle, file, options.inside);
    return { handle, size: info.size };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** Fails unless the open file lies inside `root`: by the handle's path where there is /proc, by `file`'s real path elsewhere. */
async function refuseOutside(handle: FileHandle, file: string, root: string): Promise<void> {
  const opened = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => realpath(file));
  if (!isInside(await realpath(root), opened)) throw new RegularFileError(`${file} leads outside ${root}`, 'EOUTSIDE');
}

/** Reads up to `length` bytes from the start of an opened file (fewer when it shrank meanwhile). */
export async function readFromStart(handle: FileHandle, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let read = 0;
  while (read < length) {
    const { bytesRead } = await handle.read(buffer, read, length - read, read);
    if (bytesRead === 0) break;
    read += bytesRead;
  }
  return buffer.subarray(0, read);
}

/**
 * The content of `file`, a regular file of at most `maxBytes` (as it was when opened).
 * @throws as {@link openRegularFile}
 */
export async function readRegularFile(file: string, options: RegularFileOptions = {}): Promise<Buffer> {
  const { handle, size } = await openRegularFile(file, options);
  try {
    return await readFromStart(handle, size);
  } finally {
    await handle.close();
  }
}

/** {@link readRegularFile}, synchronous. */
export function readRegularFileSync(file: string, options: Omit<RegularFileOptions, 'inside'> = {}): Buffer {
  const fd = openSync(file, openFlags(options));
  try {
    const info = fstatSync(fd);
    checkOpened(file, info, options);
    const buffer = Buffer.alloc(info.size);
    let read = 0;
    while (read < info.size) {
      const bytesRead = readSync(fd, buffer, read, info.size - read, read);
      if (bytesRead === 0) break;
      read += bytesRead;
    }
    return buffer.subarray(0, read);
  } finally {
    closeSync(fd);
  }
}

/** How much is hashed at a time. @unit bytes */
const CHUNK_BYTES = 256 * 1024;

/**
 * The sha256 and size of `file`, a regular file, read up to the size it had when opened: a file a stage keeps appending
 * to is hashed as it was, not followed forever. @throws as {@link openRegularFile}
 */
export async function hashRegularFile(file: string, options: RegularFileOptions = {}): Promise<{ bytes: number; sha256: string }> {
  const { handle, size } = await openRegularFile(file, options);
  try {
    const hash = createHash('sha256');
    const buffer = Buffer.alloc(Math.min(CHUNK_BYTES, Math.max(size, 1)));
    let bytes = 0;
    while (bytes < size) {
      const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, size - bytes), bytes);
      if (bytesRead === 0) break;
      hash.update(buffer.subarray(0, bytesRead));
      bytes += bytesRead;
    }
    return { bytes, sha256: hash.digest('hex') };
  } finally {
    await handle.close();
  }
}

/**
 * Copies `from`, a regular file, to the new file `to` (created, never replaced), up to the size `from` had when opened.
 * @throws as {@link openRegularFile}; EEXIST when `to` exists
 */
export async function copyRegularFile(from: string, to: string, options: RegularFileOptions = {}): Promise<void> {
  const { handle, size } = await openRegularFile(from, options);
  try {
    const out = await open(to, 'wx');
    try {
      const buffer = Buffer.alloc(Math.min(CHUNK_BYTES, Math.max(size, 1)));
      let copied = 0;
      while (copied < size) {
        const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, size - copied), copied);
        if (bytesRead === 0) break;
        await out.write(buffer, 0, bytesRead);
        copied += bytesRead;
      }
    } finally {
      await out.close();
    }
  } finally {
    await handle.close();
  }
}
