import path from 'node:path';
import { readOwnFile } from '../workspace/own-files.js';
import { writeFileAtomic } from '../workspace/run-workspace.js';
import type { FolderListing } from './folder-archive.js';

/*
 * A run's bookkeeping grows with the run (every stage leaves its attempt log, baseline and claims), while one stage
 * changes only its own files. So a checkpoint archives only the files that changed since this host's previous one, and
 * its manifest chains to the checkpoints before it (`bookkeepingChain`, oldest first, the first a whole archive) and
 * names what was removed since; a restore unpacks the chain in order. Folders are carried when new or when they hold a
 * change, links always (they are few). Every {@link MAX_CHAIN}th checkpoint is whole
 * again, so a restore reads a bounded number of archives. What the previous checkpoint archived is recorded here, in
 * `checkpoint-files.json` (never checkpointed itself): a host without it (a fresh one, one that restored) starts whole.
 */

/** The record of what this host's latest checkpoint archived of the bookkeeping. */
export const ARCHIVED_FILES_RECORD = 'checkpoint-files.json';

/** Checkpoints a chain holds at most before the next one archives the bookkeeping whole again. */
export const MAX_CHAIN = 32;

/** Largest record read: about 150 bytes a file. @unit bytes */
const MAX_RECORD_BYTES = 64 * 1024 * 1024;

/** A file's signature that never matches: it was archived cut short, so the next checkpoint carries it again. */
const CUT_SHORT = 'cut';

interface ArchivedFiles {
  /** The checkpoint that archived them. */
  checkpoint: string;
  /** That checkpoint's chain (see {@link BookkeepingDelta.chain}). */
  chain: string[];
  /** Each file archived so far (by its `./` path): its size and mtime when listed; `dir` for a folder. */
  files: Record<string, string>;
}

/** What one checkpoint archives of the bookkeeping. */
export interface BookkeepingDelta {
  /** The entries to archive: the files, links and new folders since the previous one (all for a whole archive). */
  entries: string[];
  /** The checkpoints whose archives come before this one's, oldest first; empty for a whole archive. */
  chain: string[];
  /** Paths archived before and gone now. */
  removed: string[];
}

async function readArchived(bookkeeping: string): Promise<ArchivedFiles | undefined> {
  const data = await readOwnFile(path.join(bookkeeping, ARCHIVED_FILES_RECORD), MAX_RECORD_BYTES);
  try {
    const record = data ? (JSON.parse(data.toString('utf8')) as Partial<ArchivedFiles>) : undefined;
    const valid = typeof record?.checkpoint === 'string' && Array.isArray(record.chain) && typeof record.files === 'object' && record.files !== null;
    return valid ? (record as ArchivedFiles) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What to archive of `listing` (the bookkeeping now), given that `latest` is the newest checkpoint this host wrote or
 * restored (its marker): only the changes since it, when this host recorded what it archived and the chain is short.
 */
export async function planBookkeeping(bookkeeping: string, listing: FolderListing, latest: string | undefined): Promise<BookkeepingDelta> {
  const before = latest === undefined ? undefined : await readArchived(bookkeeping);
  const whole = { entries: listing.entries, chain: [], removed: [] };
  if (!before || before.checkpoint !== latest || before.chain.length + 1 >= MAX_CHAIN) return whole;
  const changed = new Set(listing.entries.filter((entry) => listing.kinds.get(entry) === 'link' || signatureOf(listing, entry) !== before.files[entry]));
  // A folder goes in when it is new, or holds something that changed (tar needs it before what it holds).
  for (const entry of [...changed]) for (let up = path.posix.dirname(entry); up !== '.' && !changed.has(up); up = path.posix.dirname(up)) changed.add(up);
  const removed = Object.keys(before.files).filter((entry) => !listing.kinds.has(entry));
  return { entries: listing.entries.filter((entry) => changed.has(entry)), chain: [...before.chain, before.checkpoint], removed };
}

/** What tells a later listing that `entry` changed: a file's size and mtime; a folder's or link's kind (links are carried always). */
function signatureOf(listing: FolderListing, entry: string): string | undefined {
  const kind = listing.kinds.get(entry);
  return kind === 'file' ? listing.signatures.get(entry) : kind;
}

/** Records what checkpoint `id` archived: the files of `listing` (those in `cut` as changed, so carried again). */
export async function recordArchived(bookkeeping: string, id: string, chain: string[], listing: FolderListing, cut: ReadonlySet<string>): Promise<void> {
  const files: Record<string, string> = {};
  for (const entry of listing.entries) {
    const signature = signatureOf(listing, entry);
    if (signature !== undefined) files[entry] = cut.has(entry) ? CUT_SHORT : signature;
  }
  const record: ArchivedFiles = { checkpoint: id, chain, files };
  await writeFileAtomic(path.join(bookkeeping, ARCHIVED_FILES_RECORD), JSON.stringify(record));
}
