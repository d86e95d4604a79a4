import { mkdir, mkdtemp, rm, symlink, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findNestedRepositories, NestedRepositoryError, refuseNestedRepositories } from '../../src/activities/workspace/nested-repositories.js';

/*
 * The look for git repositories an agent made in a run's worktree (issue 33, item 2). The worker's git must not run
 * over them; the integration test git-nested-repository.test.ts shows why with the real git.
 */

let dir: string;
let outside: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'nested-repos-'));
  outside = await mkdtemp(path.join(tmpdir(), 'nested-repos-outside-'));
  // The worktree's own `.git` (a file) and the worker's bookkeeping, which holds worktrees of its own.
  await writeFile(path.join(dir, '.git'), 'gitdir: /somewhere/.git/worktrees/run\n');
  await mkdir(path.join(dir, '.agent-pipeline', 'worktrees', 'review'), { recursive: true });
  await writeFile(path.join(dir, '.agent-pipeline', 'worktrees', 'review', '.git'), 'gitdir: /somewhere\n');
  await mkdir(path.join(dir, 'src', 'deep'), { recursive: true });
  await writeFile(path.join(dir, 'src', 'deep', 'a.ts'), 'export {};\n');
});
afterEach(async () => {
  await chmod(path.join(dir, 'locked'), 0o755).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

describe('the look for repositories an agent made in a worktree', () => {
  it('finds nothing in a worktree holding only its own .git and the worker\'s bookkeeping', async () => {
    expect(await findNestedRepositories(dir)).toEqual({ folders: [], unreadable: [], truncated: false });
    await expect(refuseNestedRepositories(dir, 'commit')).resolves.toBeUndefined();
  });

  it('finds a .git folder, a .git file and a .git symlink at any depth', async () => {
    await mkdir(path.join(dir, 'sub', '.git'), { recursive: true });
    await mkdir(path.join(dir, 'src', 'deep', 'vendored'), { recursive: true });
    await writeFile(path.join(dir, 'src', 'deep', 'vendored', '.git'), 'gitdir: ../../../subgd\n');
    await mkdir(path.join(dir, 'linked'));
    await symlink(outside, path.join(dir, 'linked', '.git'));
    expect((await findNestedRepositories(dir)).folders).toEqual(['linked', 'src/deep/vendored', 'sub']);
  });

  it('follows no symlink: a link to a folder holding a repository is not looked into', async () => {
    await mkdir(path.join(outside, 'repo', '.git'), { recursive: true });
    await symlink(path.join(outside, 'repo'), path.join(dir, 'link'));
    expect((await findNestedRepositories(dir)).folders).toEqual([]);
  });

  it('refuses naming the folder and the fix', async () => {
    await mkdir(path.join(dir, 'sub', '.git'), { recursive: true });
    const refused = await refuseNestedRepositories(dir, "commit the stage's work").catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(NestedRepositoryError);
    expect((refused as Error).message).toContain('the worker did not commit the stage\'s work: the workspace holds a git repository the agent made (a .git in "sub")');
    expect((refused as Error).message).toContain('remove that .git (or its folder)');
  });

  // Root reads every folder, whatever its mode.
  it.skipIf(process.getuid?.() === 0)('refuses a folder it cannot read', async () => {
    await mkdir(path.join(dir, 'locked'));
    await chmod(path.join(dir, 'locked'), 0o000);
    await expect(refuseNestedRepositories(dir, 'commit')).rejects.toThrow('the folders "locked" of the workspace could not be read');
  });

  it('stops at its bound and refuses a worktree too large to read whole', async () => {
    for (let i = 0; i < 20; i++) await writeFile(path.join(dir, `f${i}.txt`), '');
    expect((await findNestedRepositories(dir, { maxEntries: 10 })).truncated).toBe(true);
    await expect(refuseNestedRepositories(dir, 'commit', { maxEntries: 10 })).rejects.toThrow('more than 10 files and folders');
  });
});
