import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { indexLockPath, processesHolding, removeStaleIndexLock, settleIndexLock } from '../../src/activities/workspace/git-index-lock.js';
import { pinWorktree } from '../../src/activities/workspace/git.js';
import { waitFor } from '../integration/claude-cli-world.js';
import { git, initRepo } from '../helpers/git-repo.js';

/* A stale `index.lock` is removed before an attempt; one a live process holds open is left alone. */

let dir: string;
let repo: string;
let worktree: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'git-index-lock-'));
  repo = path.join(dir, 'repo');
  worktree = path.join(dir, 'worktree');
  await initRepo(repo, { 'a.txt': 'a\n' });
  await git(repo, 'worktree', 'add', '--quiet', '-b', 'run', worktree);
  // As the worker opens a run's worktree: its gits, and its lock removal, use the git directory found then.
  await pinWorktree(worktree, repo, 'stage');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe.runIf(process.platform === 'linux')('removeStaleIndexLock', () => {
  test('finds the lock of a repository and of a linked worktree where git does', async () => {
    for (const where of [repo, worktree]) {
      const gitPath = await git(where, 'rev-parse', '--path-format=absolute', '--git-path', 'index.lock');
      expect(await indexLockPath(where)).toBe(gitPath);
    }
    expect(await indexLockPath(dir)).toBeUndefined();
  });

  test("never removes a lock where the worktree's `.git` file says, which the agent can rewrite", async () => {
    const decoy = path.join(dir, 'decoy');
    await mkdir(decoy);
    const decoyLock = path.join(decoy, 'index.lock');
    await writeFile(decoyLock, '');
    const dotGit = path.join(worktree, '.git');
    const original = await readFile(dotGit, 'utf8');
    const unpinned = path.join(dir, 'unpinned');
    await mkdir(unpinned);
    try {
      // The worker's worktree still gets the lock it pinned; a `.git` file the worker never pinned gets none.
      await writeFile(dotGit, `gitdir: ${decoy}\n`);
      await writeFile(path.join(unpinned, '.git'), `gitdir: ${decoy}\n`);
      expect(await indexLockPath(worktree)).toBe(await git(repo, 'rev-parse', '--path-format=absolute', '--git-path', 'worktrees/worktree/index.lock'));
      expect(await indexLockPath(unpinned)).toBeUndefined();
      expect(await removeStaleIndexLock(worktree)).toBeUndefined();
      expect(await removeStaleIndexLock(unpinned)).toBeUndefined();
      // Nor a `.git` symlink to a folder elsewhere.
      await rm(path.join(unpinned, '.git'));
      await symlink(decoy, path.join(unpinned, '.git'));
      expect(await removeStaleIndexLock(unpinned)).toBeUndefined();
      expect(existsSync(decoyLock)).toBe(true);
    } finally {
      await writeFile(dotGit, original);
    }
  });

  test('leaves a lock a live process holds, removes it once nobody does, and git works again', async () => {
    const lock = (await indexLockPath(worktree)) as string;
    await writeFile(lock, '');
    expect(await git(worktree, 'add', '-A').catch((err: { stderr: string }) => err.stderr)).toContain('index.lock');
    const holder = spawn('bash', ['-c', `exec 3<"${lock}"; sleep 300`], { stdio: 'ignore' });
    try {
      await waitFor(() => processesHolding(lock), (pids) => pids.includes(holder.pid as number), 'the holder to open the lock', 10_000);
      expect(await removeStaleIndexLock(worktree)).toBe(`git's ${lock} is held by pid ${holder.pid}; it was left in place`);
      expect(existsSync(lock)).toBe(true);
    } finally {
      holder.kill('SIGKILL');
    }
    await waitFor(() => processesHolding(lock), (pids) => pids.length === 0, 'the holder to be gone', 10_000);
    expect(await removeStaleIndexLock(worktree)).toMatch(/^removed a stale .*index\.lock that no process held/);
    expect(existsSync(lock)).toBe(false);
    await git(worktree, 'add', '-A');
    expect(await removeStaleIndexLock(worktree)).toBeUndefined();
  });

  test('before a commit, waits for a git still at work to let go of the lock, and gives up after its bound', async () => {
    const lock = (await indexLockPath(worktree)) as string;
    // A git at work: holds the lock open for a while, then removes it, as git does when it is done.
    const holder = spawn('bash', ['-c', `exec 3>"${lock}"; sleep 2; rm -f "${lock}"`], { stdio: 'ignore' });
    await waitFor(() => processesHolding(lock), (pids) => pids.includes(holder.pid as number), 'the holder to open the lock', 10_000);
    expect(await settleIndexLock(worktree, 30_000)).toBeUndefined();
    expect(existsSync(lock)).toBe(false);
    await writeFile(path.join(worktree, 'b.txt'), 'b\n');
    await git(worktree, 'add', '-A');
    // One that outlasts the bound is left in place, and said.
    const stuck = spawn('bash', ['-c', `exec 3>"${lock}"; sleep 300`], { stdio: 'ignore' });
    try {
      await waitFor(() => processesHolding(lock), (pids) => pids.includes(stuck.pid as number), 'the holder to open the lock', 10_000);
      const started = Date.now();
      expect(await settleIndexLock(worktree, 500)).toBe(`git's ${lock} is held by pid ${stuck.pid}; it was left in place`);
      expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    } finally {
      stuck.kill('SIGKILL');
    }
    await waitFor(() => processesHolding(lock), (pids) => pids.length === 0, 'the holder to be gone', 10_000);
    expect(await settleIndexLock(worktree, 500)).toMatch(/^removed a stale .*index\.lock that no process held/);
  });
});
