import { existsSync } from 'node:fs';
import { lstat, realpath, rm } from 'node:fs/promises';
import path from 'node:path';
import { isStrictlyInside } from '../../files/inside.js';
import { deleteHiddenRefs, hiddenRefPrefix } from './checkpoint-refs.js';
import { git } from './git.js';
import { unpinGitDir } from './git-safety.js';
import { readRecord } from './own-files.js';
import { ENDED_MARKER } from './run-folder.js';
import { runsFolder } from './worker-folder.js';
import { writeFileAtomic } from './run-workspace.js';
import { shellWord } from '../../pipeline/shell-words.js';

/**
 * Written into a run's bookkeeping folder when the run ends; removed when the folder is opened again. `prune` still
 * asks Temporal before it deletes anything: the record says which run (`temporalRunId`) ended, so a newer run that
 * reuses the id is told apart.
 */
export interface EndedMarker {
  runId: string;
  /** The Temporal run id of the run's first execution, when its folder is named after it (run-folder.ts). */
  firstExecutionRunId?: string;
  /** The Temporal run id of the execution that ended (absent in records written before it was kept). */
  temporalRunId?: string;
  status: string;
  /** @unit milliseconds since the epoch */
  endedAt: number;
  /** The run's branch was pushed, so removing the worktree loses nothing. */
  pushed: boolean;
}

/** Writes the `ended` record into the run's bookkeeping folder `bookkeeping`. */
export async function writeEndedMarker(bookkeeping: string, marker: EndedMarker): Promise<void> {
  await writeFileAtomic(path.join(bookkeeping, ENDED_MARKER), `${JSON.stringify(marker, null, 2)}\n`);
}

/** The `ended` record of the run whose bookkeeping folder is `bookkeeping` (a small regular file, never through a symlink). */
export async function readEndedMarker(bookkeeping: string): Promise<EndedMarker | undefined> {
  const marker = await readRecord<EndedMarker>(path.join(bookkeeping, ENDED_MARKER));
  return marker && typeof marker === 'object' && typeof marker.runId === 'string' ? marker : undefined;
}

/**
 * Removes a run's workspace. A git worktree is removed with `git worktree remove`, so the repository forgets it;
 * its branch stays when it was pushed, and is otherwise deleted with `git branch -d`, which refuses (and we only
 * warn) while the branch holds commits merged nowhere else: committed work is never lost by a clean-up.
 * @returns warnings for what could not be removed
 */
export async function removeRunWorkspace(root: string, dir: string, pushed?: boolean): Promise<string[]> {
  const refused = await whyNotRemovable(root, dir);
  if (refused) return [refused];
  const warnings: string[] = [];
  if (existsSync(path.join(dir, '.git'))) {
    // Without a record of the push (a run from before `workspace.push`, or pushed by hand), an upstream means pushed.
    pushed ??= !(await git(dir, ['rev-parse', '--abbrev-ref', '--symbolic-full-name', '@{upstream}'])).failed;
    const common = await git(dir, ['rev-parse', '--path-format=absolute', '--git-common-dir']);
    const branch = await git(dir, ['symbolic-ref', '--quiet', '--short', 'HEAD']);
    if (!common.failed) {
      const removed = await git(common.stdout, ['worktree', 'remove', '--force', '--', dir]);
      if (removed.failed) warnings.push(`git worktree remove ${dir} failed: ${removed.stderr.split('\n')[0]}`);
      // The run's checkpoint commits go with it (checkpoint-refs.ts).
      else await deleteHiddenRefs(common.stdout, hiddenRefPrefix(path.basename(dir)));
      if (!removed.failed && !pushed && !branch.failed) {
        const deleted = await git(common.stdout, ['branch', '-d', '--', branch.stdout]);
        if (deleted.failed) warnings.push(`branch ${branch.stdout} was kept: it has commits that are not merged or pushed anywhere (delete it with \`git branch -D ${shellWord(branch.stdout)}\` if they are not wanted)`);
      }
    }
  }
  unpinGitDir(dir);
  await rm(dir, { recursive: true, force: true });
  return warnings;
}

/**
 * Removes a run's bookkeeping folder, when its real path lies strictly inside the worker's `runs` folder (never that
 * folder, nor anything a symlink leads to). Stage worktrees inside it go with it; their repository forgets them at its
 * next `git worktree prune`. @returns warnings for what could not be removed
 */
export async function removeBookkeeping(root: string, bookkeeping: string): Promise<string[]> {
  const info = await lstat(bookkeeping).catch(() => undefined);
  if (!info) return [];
  const inside = info.isDirectory() && path.dirname(bookkeeping) === runsFolder(root) && (await whyNotRemovable(runsFolder(root), bookkeeping, false)) === undefined;
  if (!inside) return [`${bookkeeping} was kept: it is not a folder of its own inside ${runsFolder(root)}`];
  await rm(bookkeeping, { recursive: true, force: true });
  return [];
}

/**
 * Why `dir` must not be deleted, or `undefined` when it may: its real path must lie strictly inside the workspaces
 * root's real path (never the root, never above it, never through a symlink leading out), and it must not be a
 * repository's main working tree (a `.git` folder rather than a linked worktree's `.git` file).
 */
async function whyNotRemovable(root: string, dir: string, worktree = true): Promise<string | undefined> {
  let realRoot: string;
  let realDir: string;
  try {
    [realRoot, realDir] = await Promise.all([realpath(root), realpath(dir)]);
  } catch {
    return existsSync(dir) ? `${dir} was kept: its real path could not be read` : undefined;
  }
  if (!isStrictlyInside(realRoot, realDir)) {
    return `${dir} was kept: it is not inside the workspaces root ${root} (its real path is ${realDir})`;
  }
  if (!worktree) return undefined;
  const dotGit = await lstat(path.join(realDir, '.git')).catch(() => undefined);
  if (dotGit?.isDirectory()) return `${dir} was kept: it is a repository's main working tree, not a run's worktree`;
  return undefined;
}
