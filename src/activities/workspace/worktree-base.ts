import { randomUUID } from 'node:crypto';
import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { git } from './git.js';
import { readRecord } from './own-files.js';

/*
 * The commit a run's worktree was created from, kept in the run's bookkeeping: a checkpoint ships the run's branch
 * and its work in progress as a git bundle relative to it, so a checkpoint holds the run's own commits only, and a
 * host restoring it needs the repository up to that commit.
 */

/** The record of the base commit in a run's bookkeeping folder. */
export const GIT_BASE_RECORD = 'git-base.json';

/** Records the commit the worktree `dir` is at as its base, once: a later opening keeps the first record. */
export async function recordWorktreeBase(dir: string, bookkeeping: string): Promise<void> {
  const record = path.join(bookkeeping, GIT_BASE_RECORD);
  if (await readWorktreeBase(bookkeeping)) return;
  const head = await git(dir, ['rev-parse', '--verify', 'HEAD^{commit}']);
  if (head.failed) return;
  // Temp file and rename (writeFileAtomic lives in run-workspace.ts, which imports this module).
  const temp = `${record}.${randomUUID()}.tmp`;
  await writeFile(temp, `${JSON.stringify({ base: head.stdout })}\n`, { flag: 'wx' });
  await rename(temp, record);
}

/** The base commit recorded in `bookkeeping`, or undefined. */
export async function readWorktreeBase(bookkeeping: string): Promise<string | undefined> {
  const record = await readRecord<{ base?: unknown }>(path.join(bookkeeping, GIT_BASE_RECORD));
  return typeof record?.base === 'string' && /^[0-9a-f]{40,64}$/.test(record.base) ? record.base : undefined;
}
