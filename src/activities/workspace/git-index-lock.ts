import { readdirSync, readlinkSync, realpathSync } from 'node:fs';
import { lstat, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { listPids } from '../process/proc.js';
import { pinnedGitDir } from './git-safety.js';

/*
 * git takes `.git/index.lock` (O_EXCL) for any command that writes the index, holds it open while it works, and
 * removes it when done. A git killed outright (an agent's tool stopped with SIGKILL, a worker host that lost power)
 * leaves the file behind, and every later git command in that worktree fails with "Unable to create
 * '.../index.lock': File exists", including the stage commit. Before an attempt starts, a lock that no live
 * process holds open is therefore removed, and the stage result says so.
 */

/**
 * Where the worker's gits in `dir` keep its index lock: in the git directory the worker pinned when it opened the
 * worktree (git.ts, pinWorktree), or `.git/index.lock` of a repository's own folder. Never where the worktree's `.git`
 * file says: that file is the agent's to rewrite, and a lock path read from it could lead outside the workspaces root.
 */
export async function indexLockPath(dir: string): Promise<string | undefined> {
  const pinned = pinnedGitDir(dir);
  if (pinned) return path.join(pinned, 'index.lock');
  // lstat: a `.git` symlink leads elsewhere too.
  const info = await lstat(path.join(dir, '.git')).catch(() => undefined);
  return info?.isDirectory() ? path.join(dir, '.git', 'index.lock') : undefined;
}

/** Pids of the processes that have `file` open, read from /proc (none found elsewhere, or for other users' processes). */
export function processesHolding(file: string): number[] {
  const holders: number[] = [];
  const names = new Set([file]);
  try {
    names.add(realpathSync(file));
  } catch {
    // gone: then nobody holds it
  }
  for (const pid of listPids()) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or not ours to read
    }
    for (const fd of fds) {
      try {
        if (names.has(readlinkSync(`/proc/${pid}/fd/${fd}`))) {
          holders.push(pid);
          break;
        }
      } catch {
        // closed meanwhile
      }
    }
  }
  return holders;
}

/** How many times {@link findIndexLock} looks again when the lock changed hands while it looked. */
const LOOKS = 3;

/**
 * The worktree's `index.lock` and the processes holding it open; undefined when there is none (or no /proc to ask).
 * The lock is looked at again after its holders are listed: a git that finished meanwhile removed it (nobody held
 * it, yet it was never stale), and one another git took meanwhile is that git's. A lock that keeps changing hands is
 * in use: undefined.
 */
async function findIndexLock(dir: string): Promise<{ lock: string; holders: number[] } | undefined> {
  const lock = await indexLockPath(dir);
  // Without /proc nobody can tell a live git from a dead one: leave the lock alone.
  if (!lock || process.platform !== 'linux') return undefined;
  for (let look = 0; look < LOOKS; look++) {
    const before = await stat(lock, { bigint: true }).catch(() => undefined);
    if (!before) return undefined;
    const holders = processesHolding(lock);
    const after = await stat(lock, { bigint: true }).catch(() => undefined);
    if (!after) return undefined;
    // The same file, not a new one that reused its inode number.
    if (after.ino === before.ino && after.ctimeNs === before.ctimeNs) return { lock, holders };
  }
  return undefined;
}

/**
 * Removes the worktree's `index.lock` when no live process holds it open.
 * @returns the warning for the stage result, or undefined when there was no stale lock
 */
export async function removeStaleIndexLock(dir: string): Promise<string | undefined> {
  return settleIndexLock(dir, 0);
}

/** How long a stage's commit waits for a git still at work in its worktree. @unit milliseconds */
export const INDEX_LOCK_WAIT_MS = 10_000;

/**
 * Before a stage's commit: while a live process holds the worktree's `index.lock` (a git the agent started, still at
 * work as the agent ended), waits for it, at most `waitMs`; then removes the lock if nobody holds it any more. A lock
 * still held after the wait stays, and the commit fails with git's own words.
 * @returns the warning for the stage result, as {@link removeStaleIndexLock}
 */
export async function settleIndexLock(dir: string, waitMs = INDEX_LOCK_WAIT_MS): Promise<string | undefined> {
  const deadline = Date.now() + waitMs;
  let found = await findIndexLock(dir);
  while (found && found.holders.length > 0 && Date.now() < deadline) {
    await sleep(100);
    found = await findIndexLock(dir);
  }
  if (!found) return undefined;
  if (found.holders.length > 0) return `git's ${found.lock} is held by pid ${found.holders.join(', ')}; it was left in place`;
  await rm(found.lock, { force: true });
  return `removed a stale ${found.lock} that no process held (left by a git command that was killed); git works again in the workspace`;
}
