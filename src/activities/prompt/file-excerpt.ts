import { constants } from 'node:fs';
import { open, readlink, realpath, type FileHandle } from 'node:fs/promises';
import { resolveInside } from '../workspace/run-workspace.js';

/** The beginning of a file, read with a size bound, as a prompt inlines it. */
export interface FileExcerpt {
  /** The text read (UTF-8), empty for binary files. */
  text: string;
  /** The whole file's size. @unit bytes */
  bytes: number;
  /** True when only the first `maxBytes` were read. */
  cut: boolean;
  /** True when the file looks binary (a NUL byte near the start); its text is not read. */
  binary: boolean;
}

/**
 * Reads at most `maxBytes` of a file; never loads more, however large the file is. A multi-byte
 * character cut at the bound is dropped rather than shown broken. With `root`, the file opened must lie inside it
 * once every symlink is followed: a stage running alongside may have swapped the file, or a folder above it, for a link.
 * @throws the file system's error (ENOENT…), code `ENOTREG` for anything but a regular file, or code `EOUTSIDE` for a
 * file outside `root`, for the caller to report
 */
export async function readFileExcerpt(file: string, maxBytes: number, root?: string): Promise<FileExcerpt> {
  // Non-blocking, so that opening a FIFO does not wait for a writer; then only regular files are read (a device's size
  // says nothing of what it yields).
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw Object.assign(new Error(`${file} is not a regular file`), { code: 'ENOTREG' });
    if (root) await refuseOutside(handle, file, root);
    const { size } = info;
    const length = Math.min(size, Math.max(0, maxBytes));
    const buffer = Buffer.alloc(length);
    let read = 0;
    while (read < length) {
      const { bytesRead } = await handle.read(buffer, read, length - read, read);
      if (bytesRead === 0) break;
      read += bytesRead;
    }
    const data = buffer.subarray(0, read);
    if (data.subarray(0, 8_000).includes(0)) return { text: '', bytes: size, cut: false, binary: true };
    const cut = size > read;
    return { text: new TextDecoder('utf-8').decode(cut ? trimPartialCharacter(data) : data), bytes: size, cut, binary: false };
  } finally {
    await handle.close();
  }
}

/**
 * Fails unless the open file lies inside `root`. Checked on the file as opened (Linux's /proc/self/fd), not on its path,
 * which a symlink swapped in after the check would lead elsewhere; by its path where there is no /proc.
 */
async function refuseOutside(handle: FileHandle, file: string, root: string): Promise<void> {
  const opened = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => realpath(file));
  if (!resolveInside(await realpath(root), opened)) throw Object.assign(new Error(`${file} leads outside ${root}`), { code: 'EOUTSIDE' });
}

/** Drops a trailing, incomplete UTF-8 sequence. */
function trimPartialCharacter(data: Buffer): Buffer {
  let end = data.length;
  // Step back over continuation bytes (10xxxxxx) to the lead byte of the last character.
  let start = end - 1;
  while (start > 0 && start > end - 4 && (data[start] & 0xc0) === 0x80) start--;
  if (start < 0) return data;
  const lead = data[start];
  const needed = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  if (end - start < needed) end = start;
  return data.subarray(0, end);
}
