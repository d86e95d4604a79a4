import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { git } from './git.js';
import { INTERNAL_DIR, writeFileAtomic } from './run-workspace.js';

/** Written into a run's bookkeeping folder when the run ends, so `prune` knows without asking Temporal. */
export interface EndedMarker {
  runId: string;
  status: string;
  /** @unit milliseconds since the epoch */
  endedAt: number;
  /** The run's branch was pushed, so removing the worktree loses nothing. */
  pushed: boolean;
}

const MARKER = 'ended.json';

export async function writeEndedMarker(dir: string, marker: EndedMarker): Promise<void> {
  await writeFileAtomic(path.join(dir, INTERNAL_DIR, MARKER), `${JSON.stringify(marker, null, 2)}\n`);
}

export async function readEndedMarker(dir: string): Promise<EndedMarker | undefined> {
  try {
    return JSON.parse(await readFile(path.join(dir, INTERNAL_DIR, MARKER), 'utf8')) as EndedMarker;
  } catch {
    return undefined;
  }
}

/**
 * Removes a run's workspace. A git worktree is removed with `git worktree remove`, so the repository forgets it;
 * its branch stays when it was pushed, and is otherwise deleted with `git branch -d`, which refuses (and we only
 * warn) while the branch holds commits merged nowhere else: committed work is never lost by a clean-up.
 * @returns warnings for what could not be removed
 */
export async function removeRunWorkspace(dir: string, pushed?: boolean): Promise<string[]> {
  const warnings: string[] = [];
  if (existsSync(path.join(dir, '.git'))) {
    // Without a record of the push (a run from before `workspace.push`, or pushed by hand), an upstream means pushed.
    pushed ??= !(await git(dir, ['rev-parse', '--abbrev-ref', '--symbolic-full-name', '@{upstream}'])).failed;
    const common = await git(dir, ['rev-parse', '--path-format=absolute', '--git-common-dir']);
    const branch = await git(dir, ['symbolic-ref', '--quiet', '--short', 'HEAD']);
    if (!common.failed) {
      const removed = await git(common.stdout, ['worktree', 'remove', '--force', dir]);
      if (removed.failed) warnings.push(`git worktree remove ${dir} failed: ${removed.stderr.split('\n')[0]}`);
      else if (!pushed && !branch.failed) {
        const deleted = await git(common.stdout, ['branch', '-d', branch.stdout]);
        if (deleted.failed) warnings.push(`branch ${branch.stdout} was kept: it has commits that are not merged or pushed anywhere (delete it with \`git branch -D ${branch.stdout}\` if they are not wanted)`);
      }
    }
  }
  await rm(dir, { recursive: true, force: true });
  return warnings;
}
