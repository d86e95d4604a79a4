import { lstat, readdir, realpath, rename, rm, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { RunRef } from '../../pipeline/run-state.js';
import { git } from './git.js';
import { isRealDir, readOwnFile } from './own-files.js';
import { OLD_BOOKKEEPING_DIR, oldRecordedRunId, type RunPaths } from './run-folder.js';
import { openWorkerSubfolder } from './worker-folder.js';

/*
 * Runs in flight when a worker is upgraded keep their bookkeeping (Claude Code's sessions, attempt logs, failures
 * and baselines) in `<run folder>/.agent-pipeline/`, inside the tree their agent writes. Moving it to the worker's own
 * folder once, the first time the run's folder is opened by a worker of this release, lets such a run resume its
 * sessions and see its earlier attempts; leaving it would lose them.
 */

/**
 * Moves the old in-tree bookkeeping of `run` to `paths.bookkeeping` (one rename), when the old folder is a real
 * folder (`lstat`: a symlink of that name is never followed, nor moved) recording this run, and the new one does not
 * exist yet. Symlinks inside it (an agent's, planted before the move) are removed rather than written through later.
 * A run that names its first execution started after bookkeeping left the trees: such a folder in its tree is its agent's.
 * @param repo the run's repository, whose records of stage worktrees moved along are pointed at their new place
 * @returns whether it moved anything
 */
export async function moveOldBookkeeping(root: string, paths: RunPaths, run: RunRef, repo?: string): Promise<boolean> {
  const old = path.join(paths.dir, OLD_BOOKKEEPING_DIR);
  if (run.firstExecutionRunId !== undefined) return false;
  if ((await lstat(paths.bookkeeping).catch(() => undefined)) || !(await isRealDir(old))) return false;
  // The folder is the run's own (runFolder chose it), but a record naming another run means it is not this run's.
  if (oldRecordedRunId(paths.dir) !== run.runId) return false;
  const oldWorktrees = path.join(await realpath(paths.dir), OLD_BOOKKEEPING_DIR, 'worktrees');
  await openWorkerSubfolder(root, 'runs');
  try {
    await rename(old, paths.bookkeeping);
  } catch (err) {
    // Another attempt moved it first (ENOENT, ENOTEMPTY), or it lies on another file system (EXDEV): the run goes on
    // with a new bookkeeping folder, its earlier sessions not resumed.
    if (['ENOENT', 'ENOTEMPTY', 'EEXIST', 'EXDEV'].includes((err as NodeJS.ErrnoException).code ?? '')) return false;
    throw err;
  }
  await removeSymlinks(paths.bookkeeping, true);
  // It told git to ignore the in-tree folder; out of the tree it means nothing.
  await rm(path.join(paths.bookkeeping, '.gitignore'), { force: true });
  if (repo) await relinkStageWorktrees(repo, oldWorktrees, path.join(await realpath(paths.bookkeeping), 'worktrees'));
  return true;
}

/** Removes every symlink under `dir`, never following one; stage worktrees (`worktrees/`) are agents' trees and stay as they are. */
async function removeSymlinks(dir: string, top: boolean): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isSymbolicLink()) await unlink(full);
    else if (entry.isDirectory() && !(top && entry.name === 'worktrees')) await removeSymlinks(full, false);
  }
}

/** Upper bound of a worktree's `gitdir` record, a path. @unit bytes */
const MAX_GITDIR_RECORD_BYTES = 4_096;

/**
 * Points the repository's records of the stage worktrees that were under `from` at their new place under `to`, as
 * `git worktree repair` would, but from the repository's own records: a worktree's `.git` file is in its agent's reach.
 */
async function relinkStageWorktrees(repo: string, from: string, to: string): Promise<void> {
  const common = await git(repo, ['rev-parse', '--path-format=absolute', '--git-common-dir']);
  if (common.failed) return;
  const records = path.join(common.stdout, 'worktrees');
  for (const name of await readdir(records).catch(() => [])) {
    const file = path.join(records, name, 'gitdir');
    const record = await readOwnFile(file, MAX_GITDIR_RECORD_BYTES);
    if (!record) continue;
    const gitdir = record.toString('utf8').trim();
    if (gitdir.startsWith(from + path.sep)) await writeFile(file, `${to}${gitdir.slice(from.length)}\n`);
  }
}
