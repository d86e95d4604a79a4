import { openRegularFile, readFromStart } from '../../files/regular-file.js';

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
  // Followed on purpose (a workspace's symlink inside it is read where it leads), checked where it leads with `root`.
  const { handle, size } = await openRegularFile(file, { follow: true, ...(root === undefined ? {} : { inside: root }) });
  try {
    const data = await readFromStart(handle, Math.min(size, Math.max(0, maxBytes)));
    if (data.subarray(0, 8_000).includes(0)) return { text: '', bytes: size, cut: false, binary: true };
    const cut = size > data.length;
    return { text: new TextDecoder('utf-8').decode(cut ? trimPartialCharacter(data) : data), bytes: size, cut, binary: false };
  } finally {
    await handle.close();
  }
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
