import { randomBytes } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { chmod, mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import type { CheckpointOptions } from '../../src/activities/checkpoint/settings.js';
import { takeCheckpoint } from '../../src/activities/checkpoint/take-checkpoint.js';
import { commitAll } from '../../src/activities/workspace/git.js';
import { openRunWorkspace, type RunWorkspace } from '../../src/activities/workspace/run-workspace.js';
import { FileStore } from '../../src/store/file-store.js';
import { git, initRepo } from '../helpers/git-repo.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';

/*
 * The worker stages a worktree (`git add --all`) for a checkpoint and for a stage's commit while agents may still run
 * in it (a periodic checkpoint, a parallel stage's first start or commit). git opens every file it found by its path,
 * following links in the folders above it: an agent that swaps a folder git walked for a symlink to a folder of the
 * worker (its `~/.ssh`, which its sandbox hides from it) just before git reads the files there had git read the
 * worker's key into the repository's objects, which the agent's sandbox reads (`.git` is open to it). Here the swap is
 * timed on git's first object write, as an agent watching `.git/objects` would time it.
 */

const RUN = 'links/run-1';
const KEY = `WORKER-KEY-${randomBytes(6).toString('hex')}`;

let scratch: string;
let root: string;
let repo: string;
let sshDir: string;
let workspace: RunWorkspace;
let watcher: FSWatcher | undefined;

beforeEach(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-staging-links-'));
  root = path.join(scratch, 'workspaces');
  repo = path.join(scratch, 'repo');
  sshDir = path.join(scratch, 'home', '.ssh');
  await mkdir(sshDir, { recursive: true });
  await writeFile(path.join(sshDir, 'id_ed25519'), `${KEY}\n`);
  await chmod(path.join(sshDir, 'id_ed25519'), 0o600);
  await initRepo(repo, { 'README.md': 'base\n' });
  workspace = await openRunWorkspace(root, { runId: RUN }, { git: { repo, branch: 'agent/links-run-1' } });
});
afterEach(async () => {
  watcher?.close();
  watcher = undefined;
  await rm(scratch, { recursive: true, force: true });
});

/** Swaps `zz` for a link to the worker's `~/.ssh` once git writes its first object: its walk is over by then. */
function swapOnFirstObject(): { swapped: Promise<void> } {
  let done: () => void;
  const swapped = new Promise<void>((resolve) => (done = resolve));
  let fired = false;
  watcher = watch(path.join(repo, '.git', 'objects'), { recursive: true }, () => {
    if (fired) return;
    fired = true;
    void rename(path.join(workspace.dir, 'zz'), path.join(workspace.dir, 'zz-was'))
      .then(() => symlink(sshDir, path.join(workspace.dir, 'zz')))
      .then(() => done());
  });
  return { swapped };
}

/** Whether an object of the repository holds the key: what an agent reading `.git` can read. */
async function keyInRepository(): Promise<boolean> {
  return (await execa('git', ['cat-file', '--batch-all-objects', '--batch'], { cwd: repo, reject: false, encoding: 'latin1' })).stdout.includes(KEY);
}

describe.skipIf(MISSING_SANDBOX_PACKAGES.includes('bubblewrap'))('staging a worktree while a folder in it is swapped for a link', () => {
  beforeEach(async () => {
    // What the agent leaves: a large file git hashes first, and a folder git walks, then finds swapped for a link.
    await writeFile(path.join(workspace.dir, 'aa-large.bin'), randomBytes(24 * 1024 * 1024));
    await mkdir(path.join(workspace.dir, 'zz'));
    await writeFile(path.join(workspace.dir, 'zz', 'id_ed25519'), 'a placeholder of the same name\n');
  });

  test("a checkpoint never reads the worker's file the link leads to into the repository", { timeout: 60_000 }, async () => {
    const options: CheckpointOptions = { store: new FileStore(path.join(scratch, 'store')), everyMs: 60_000, maxBytes: 256 * 1024 * 1024 };
    const { swapped } = swapOnFirstObject();
    const outcome = await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'git', repo }, 'periodic').then(() => 'taken', String);
    await swapped;
    expect(await keyInRepository()).toBe(false);
    // Confined, git finds nothing where the link leads: that checkpoint fails, naming the file (the next one is taken).
    expect(outcome).toMatch(/unable to stat 'zz\/id_ed25519'/);
  });

  test("a stage's commit never reads the worker's file the link leads to into the repository", { timeout: 60_000 }, async () => {
    const { swapped } = swapOnFirstObject();
    const outcome = await commitAll(workspace.dir, 'the stage').then(() => 'committed', String);
    await swapped;
    expect(await keyInRepository()).toBe(false);
    expect(outcome).toMatch(/unable to stat 'zz\/id_ed25519'/);
  });
});

describe("staging a worktree confined keeps the operator's git settings", () => {
  let savedHome: string | undefined;
  beforeEach(async () => {
    // The operator's global config names an ignore file of its own: the confined git reads neither file's path, so the
    // setting reaches it as a variable and the file it names at its own place.
    const home = path.join(scratch, 'operator-home');
    await mkdir(home, { recursive: true });
    await writeFile(path.join(home, '.gitconfig'), '[core]\n\texcludesFile = ~/operator-ignore\n');
    await writeFile(path.join(home, 'operator-ignore'), '*.operator-ignored\n');
    savedHome = process.env.HOME;
    process.env.HOME = home;
    await writeFile(path.join(workspace.dir, 'notes.operator-ignored'), 'not for commits\n');
    await writeFile(path.join(workspace.dir, 'kept.txt'), 'kept\n');
  });
  afterEach(() => {
    process.env.HOME = savedHome;
  });

  test("a stage's commit and a checkpoint leave out what the operator's global ignore file names", { timeout: 60_000 }, async () => {
    const commit = await commitAll(workspace.dir, 'the stage');
    expect((await git(repo, 'ls-tree', '-r', '--name-only', commit!)).split('\n').sort()).toEqual(['README.md', 'kept.txt']);
    await writeFile(path.join(workspace.dir, 'later.txt'), 'later\n');
    const options: CheckpointOptions = { store: new FileStore(path.join(scratch, 'store')), everyMs: 60_000, maxBytes: 64 * 1024 * 1024 };
    const manifest = await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'git', repo }, 'periodic');
    expect((await git(repo, 'ls-tree', '-r', '--name-only', manifest.git!.work)).split('\n').sort()).toEqual(['README.md', 'kept.txt', 'later.txt']);
  });
});
