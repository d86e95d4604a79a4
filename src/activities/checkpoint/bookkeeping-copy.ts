import { lstat, mkdir, open, readlink, symlink, truncate } from 'node:fs/promises';
import path from 'node:path';
import { copyRegularFile, RegularFileError } from '../../files/regular-file.js';
import { listFolder, type FolderListing } from './folder-archive.js';
import { RESTORE_RECORD } from './marker.js';

/*
 * The run's bookkeeping folder is copied before it is archived: Claude Code appends to its session files (and the
 * worker to its transcripts) while a stage runs, so a file read mid-write may end in half a line. Each copied `.jsonl`
 * is cut after its last complete line, which is what `--resume` and `logs` can read.
 */

/** Bookkeeping left out of a checkpoint: stage worktrees (`isolation: stage`, agents' trees), the local markers. */
export const NOT_CHECKPOINTED = new Set(['worktrees', 'checkpoint.json', 'checkpoint-files.json', 'ended.json', RESTORE_RECORD]);

/**
 * Files never carried, wherever they are: what may hold the worker's credentials or settings (each attempt's Claude
 * Code settings and MCP config, Claude Code's own credentials file). Every attempt writes them again, so a restored run
 * needs none of them, and the store never holds a secret of the worker.
 */
export const NEVER_CHECKPOINTED_FILES = new Set(['settings.json', 'settings.local.json', 'mcp-config.json', '.credentials.json']);

function leftOut(relative: string): boolean {
  return NOT_CHECKPOINTED.has(relative) || NEVER_CHECKPOINTED_FILES.has(relative.slice(relative.lastIndexOf('/') + 1));
}

/** How far to look back for a line's end at a time. @unit bytes */
const TAIL_CHUNK = 64 * 1024;

/** The bookkeeping folder as a checkpoint carries it: what is never carried left out. */
export async function listBookkeeping(bookkeeping: string, maxBytes: number): Promise<FolderListing> {
  return listFolder(bookkeeping, { maxBytes, skip: leftOut });
}

/**
 * Copies `entries` (of `listing`, folders before what they hold) from `bookkeeping` into the empty folder `into`;
 * returns the `.jsonl` files cut short (their last line was still being written).
 */
export async function copyBookkeeping(bookkeeping: string, into: string, listing: FolderListing, entries: readonly string[]): Promise<Set<string>> {
  const cut = new Set<string>();
  for (const entry of entries) {
    const from = path.join(bookkeeping, entry);
    const to = path.join(into, entry);
    const kind = listing.kinds.get(entry);
    if (kind === 'dir') {
      await mkdir(to, { recursive: true });
    } else if (kind === 'link') {
      await symlink(await readlink(from), to);
    } else {
      const copied = await copyRegularFile(from, to).then(
        () => true,
        (err: NodeJS.ErrnoException) => {
          // A file removed, or replaced by anything but a regular file (a FIFO's open would wait, a symlink leads
          // anywhere), since it was listed is simply left out.
          if (err.code !== 'ENOENT' && err.code !== 'ELOOP' && !(err instanceof RegularFileError)) throw err;
          return false;
        },
      );
      if (copied && entry.endsWith('.jsonl') && (await cutToCompleteLines(to))) cut.add(entry);
    }
  }
  return cut;
}

/** Cuts `file` after its last complete line; whether that cut anything. */
async function cutToCompleteLines(file: string): Promise<boolean> {
  const length = await completeLinesLength(file).catch(() => undefined);
  if (length === undefined) return false;
  const { size } = await lstat(file);
  if (length === size) return false;
  await truncate(file, length);
  return true;
}

/** The length of `file` up to and including its last newline (0 when it has none). */
export async function completeLinesLength(file: string): Promise<number> {
  const handle = await open(file, 'r');
  try {
    const { size } = await handle.stat();
    const buffer = Buffer.alloc(TAIL_CHUNK);
    for (let end = size; end > 0; end -= TAIL_CHUNK) {
      const start = Math.max(0, end - TAIL_CHUNK);
      const { bytesRead } = await handle.read(buffer, 0, end - start, start);
      const at = buffer.subarray(0, bytesRead).lastIndexOf(0x0a);
      if (at >= 0) return start + at + 1;
    }
    return 0;
  } finally {
    await handle.close();
  }
}
