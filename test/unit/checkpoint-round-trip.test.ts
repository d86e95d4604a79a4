import { existsSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { AttemptCheckpoints, finishRestore } from '../../src/activities/checkpoint/stage-checkpoints.js';
import { ARCHIVED_FILES_RECORD } from '../../src/activities/checkpoint/bookkeeping-delta.js';
import { checkpointKey, listCheckpoints, MANIFEST_OBJECT } from '../../src/activities/checkpoint/keys.js';
import { findStageStartCheckpoint } from '../../src/activities/checkpoint/stage-start.js';
import { restoreIfNeeded, type RestorePlace } from '../../src/activities/checkpoint/restore-checkpoint.js';
import type { CheckpointOptions } from '../../src/activities/checkpoint/settings.js';
import { CheckpointTooLargeError, takeCheckpoint, type CheckpointTarget } from '../../src/activities/checkpoint/take-checkpoint.js';
import { hiddenRefPrefix } from '../../src/activities/workspace/checkpoint-refs.js';
import { removeRunWorkspace } from '../../src/activities/workspace/remove-workspace.js';
import { openRunWorkspace, type RunWorkspace } from '../../src/activities/workspace/run-workspace.js';
import { FileStore } from '../../src/store/file-store.js';
import { git, initRepo } from '../helpers/git-repo.js';

/*
 * A run's checkpoint taken and restored with real git, real tar and a folder store: what a host that lost the run's
 * folder and bookkeeping gets back, and what it refuses.
 */

const RUN = 'ckpt/run-1';
const SESSION = 'claude/projects/-w/session-1.jsonl';

let scratch: string;
let root: string;
let storeDir: string;
let options: CheckpointOptions;

beforeEach(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-checkpoint-'));
  root = path.join(scratch, 'workspaces');
  storeDir = path.join(scratch, 'store');
  options = { store: new FileStore(storeDir), everyMs: 60_000, maxBytes: 64 * 1024 * 1024 };
});
afterEach(async () => {
  await rm(scratch, { recursive: true, force: true });
});

/** A session file whose writer was cut off mid-line. */
async function writeSession(workspace: RunWorkspace): Promise<void> {
  const file = path.join(workspace.bookkeeping, SESSION);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, '{"turn":1}\n{"turn":2}\n{"tur');
  // What an attempt writes again, and what may hold the worker's credentials: never carried.
  await mkdir(path.join(workspace.bookkeeping, 'stages', 'build'), { recursive: true });
  await writeFile(path.join(workspace.bookkeeping, 'stages', 'build', 'settings.json'), '{"apiKeyHelper":"secret"}');
  await writeFile(path.join(workspace.bookkeeping, 'claude', '.credentials.json'), '{"token":"secret"}');
}

/** The credential and settings files an attempt writes were left out of the restored bookkeeping. */
function expectNoSettingsCarried(workspace: RunWorkspace): void {
  expect(existsSync(path.join(workspace.bookkeeping, 'stages', 'build', 'settings.json'))).toBe(false);
  expect(existsSync(path.join(workspace.bookkeeping, 'claude', '.credentials.json'))).toBe(false);
  expect(existsSync(path.join(workspace.bookkeeping, 'stages', 'build'))).toBe(true);
}

/** The host loses the run: its folder and its bookkeeping are gone. */
async function loseHost(workspace: RunWorkspace): Promise<void> {
  await rm(workspace.dir, { recursive: true, force: true });
  await rm(workspace.bookkeeping, { recursive: true, force: true });
}

function expectFailure(err: unknown, type: string): ApplicationFailure {
  expect(err).toBeInstanceOf(ApplicationFailure);
  expect((err as ApplicationFailure).type).toBe(type);
  expect((err as ApplicationFailure).nonRetryable).toBe(true);
  return err as ApplicationFailure;
}

describe('a git workspace', () => {
  let repo: string;
  const branch = 'agent/ckpt-run-1';
  const place = (): RestorePlace => ({ runId: RUN, workspacesRoot: root, kind: 'git', repo, branch, stageId: 'build' });

  beforeEach(async () => {
    repo = path.join(scratch, 'repo');
    await initRepo(repo, { 'tracked.txt': 'base\n', 'gone.txt': 'to delete\n', '.gitignore': '*.log\n' });
  });

  async function openAndWork(): Promise<RunWorkspace> {
    const workspace = await openRunWorkspace(root, { runId: RUN }, { git: { repo, branch } });
    await writeFile(path.join(workspace.dir, 'committed.txt'), 'committed\n');
    await git(workspace.dir, 'add', 'committed.txt');
    await git(workspace.dir, 'commit', '--quiet', '-m', 'a commit of the stage');
    await writeFile(path.join(workspace.dir, 'tracked.txt'), 'changed, not committed\n');
    await rm(path.join(workspace.dir, 'gone.txt'));
    await writeFile(path.join(workspace.dir, 'untracked.txt'), 'new\n');
    await writeFile(path.join(workspace.dir, 'debug.log'), 'ignored\n');
    await git(workspace.dir, 'init', '--quiet', 'nested');
    await writeFile(path.join(workspace.dir, 'nested', 'inside.txt'), 'a repository the agent made\n');
    await symlink('/etc/hostname', path.join(workspace.dir, 'outside-link'));
    await writeSession(workspace);
    return workspace;
  }

  test('comes back with its commits, uncommitted and untracked changes, links as links, and the session cut to its last line', async () => {
    const workspace = await openAndWork();
    const manifest = await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'git', repo }, 'test');
    expect(Object.keys(manifest.objects).sort()).toEqual(['bookkeeping.tar', 'workspace.bundle']);

    // A new host: no run folder, no bookkeeping, no branch, no checkpoint objects in the repository.
    await loseHost(workspace);
    await git(repo, 'worktree', 'prune');
    await git(repo, 'branch', '-D', branch);
    await git(repo, 'update-ref', '-d', manifest.git!.ref);
    await git(repo, 'gc', '--quiet', '--prune=now');
    expect(await git(repo, 'cat-file', '-t', manifest.git!.work).catch(() => 'missing')).toBe('missing');

    const restored = await restoreIfNeeded(options, place());
    expect(restored?.manifest.id).toBe(manifest.id);
    const reopened = await openRunWorkspace(root, { runId: RUN }, { git: { repo, branch } });
    await finishRestore(restored, reopened);

    expect(await git(reopened.dir, 'log', '--format=%s', '-1')).toBe('a commit of the stage');
    expect(await readFile(path.join(reopened.dir, 'tracked.txt'), 'utf8')).toBe('changed, not committed\n');
    expect(existsSync(path.join(reopened.dir, 'gone.txt'))).toBe(false);
    expect(await readFile(path.join(reopened.dir, 'untracked.txt'), 'utf8')).toBe('new\n');
    const status = (await git(reopened.dir, 'status', '--porcelain')).split('\n').sort();
    expect(status).toEqual([' D gone.txt', ' M tracked.txt', '?? outside-link', '?? untracked.txt']);
    // Not carried: ignored files, repositories the agent made. A link stays a link to where it pointed.
    expect(existsSync(path.join(reopened.dir, 'debug.log'))).toBe(false);
    expect(existsSync(path.join(reopened.dir, 'nested'))).toBe(false);
    expect((await lstat(path.join(reopened.dir, 'outside-link'))).isSymbolicLink()).toBe(true);
    expect(await readlink(path.join(reopened.dir, 'outside-link'))).toBe('/etc/hostname');
    expect(await readFile(path.join(reopened.bookkeeping, SESSION), 'utf8')).toBe('{"turn":1}\n{"turn":2}\n');
    expectNoSettingsCarried(reopened);
    // A host that has the run as new as the store does not restore again.
    expect(await restoreIfNeeded(options, place())).toBeUndefined();
  });

  test('a later checkpoint archives only the bookkeeping that changed, chained to the ones before, and a restore unpacks the chain', async () => {
    const workspace = await openAndWork();
    const target: CheckpointTarget = { runId: RUN, workspacesRoot: root, workspace, kind: 'git', repo };
    const earlier = path.join(workspace.bookkeeping, 'stages', 'earlier');
    await mkdir(earlier, { recursive: true });
    await writeFile(path.join(earlier, 'attempt-1.jsonl'), '{"line":1}\n'.repeat(10_000));
    await writeFile(path.join(earlier, 'removed.json'), '{}\n');
    const first = await takeCheckpoint(options, target, 'test');
    expect(first.bookkeepingChain).toBeUndefined();
    // The session's cut-off line completes, a later stage writes its log, a record goes.
    await writeFile(path.join(workspace.bookkeeping, SESSION), '{"turn":1}\n{"turn":2}\n{"turn":3}\n');
    await mkdir(path.join(workspace.bookkeeping, 'stages', 'later'), { recursive: true });
    await writeFile(path.join(workspace.bookkeeping, 'stages', 'later', 'attempt-1.jsonl'), '{"later":1}\n');
    await rm(path.join(earlier, 'removed.json'));
    const second = await takeCheckpoint(options, target, 'test');
    expect(second.bookkeepingChain).toEqual([first.id]);
    expect(second.bookkeepingRemoved).toEqual(['./stages/earlier/removed.json']);
    // The earlier stage's 110 KB log is not archived again.
    expect(second.objects['bookkeeping.tar']!.bytes).toBeLessThan(first.objects['bookkeeping.tar']!.bytes / 4);
    const third = await takeCheckpoint(options, target, 'test');
    expect(third.bookkeepingChain).toEqual([first.id, second.id]);
    // Beyond the newest two, a checkpoint is kept while a kept one chains to it.
    expect(await listCheckpoints(options.store, { runId: RUN })).toEqual([first.id, second.id, third.id]);

    await loseHost(workspace);
    expect((await restoreIfNeeded(options, place()))?.manifest.id).toBe(third.id);
    expect(await readFile(path.join(workspace.bookkeeping, SESSION), 'utf8')).toBe('{"turn":1}\n{"turn":2}\n{"turn":3}\n');
    expect(await readFile(path.join(earlier, 'attempt-1.jsonl'), 'utf8')).toBe('{"line":1}\n'.repeat(10_000));
    expect(await readFile(path.join(workspace.bookkeeping, 'stages', 'later', 'attempt-1.jsonl'), 'utf8')).toBe('{"later":1}\n');
    expect(existsSync(path.join(earlier, 'removed.json'))).toBe(false);
    expectNoSettingsCarried(workspace);
    // A host that restored has no record of what was archived: its next checkpoint is whole, and the chain is let go.
    const reopened = await openRunWorkspace(root, { runId: RUN }, { git: { repo, branch } });
    const fourth = await takeCheckpoint(options, { ...target, workspace: reopened }, 'test');
    expect(fourth.bookkeepingChain).toBeUndefined();
    const fifth = await takeCheckpoint(options, { ...target, workspace: reopened }, 'test');
    expect(fifth.bookkeepingChain).toEqual([fourth.id]);
    expect(await listCheckpoints(options.store, { runId: RUN })).toEqual([fourth.id, fifth.id]);
  });

  test("after a run's first checkpoint, neither checkpoints nor the restore check list the run's checkpoints, which grow with the run", async () => {
    const workspace = await openAndWork();
    const target: CheckpointTarget = { runId: RUN, workspacesRoot: root, workspace, kind: 'git', repo };
    const list = vi.spyOn(options.store, 'list');
    const checkpoints = new AttemptCheckpoints(options, target, 60_000);
    await checkpoints.start(true, 'build');
    await checkpoints.end();
    const firstListings = list.mock.calls.length;
    const later: string[] = [];
    for (let i = 0; i < 4; i++) later.push((await takeCheckpoint(options, target, 'periodic')).id);
    expect(await restoreIfNeeded(options, place())).toBeUndefined();
    expect(list.mock.calls.length).toBe(firstListings);
    list.mockRestore();
    // What the listing would have kept: the stage's first start and the newest two (whole archives chain to none).
    const ids = await listCheckpoints(options.store, { runId: RUN });
    expect(ids.slice(-2)).toEqual(later.slice(-2));
    expect((await findStageStartCheckpoint(options.store, { runId: RUN }, 'build'))?.id).toBe(ids[0]);
    // A host that lost the run restores the newest.
    await loseHost(workspace);
    expect((await restoreIfNeeded(options, place()))?.manifest.id).toBe(later.at(-1));
  });

  test('keeps its work commit under a hidden ref, never on the branch or in the agent\'s index, and prune deletes the ref', async () => {
    const workspace = await openAndWork();
    const indexBefore = await git(workspace.dir, 'status', '--porcelain');
    const first = await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'git', repo }, 'test');
    const second = await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'git', repo }, 'test');
    expect(await git(workspace.dir, 'status', '--porcelain')).toBe(indexBefore);
    expect(await git(repo, 'rev-parse', `refs/heads/${branch}`)).toBe(second.git!.tip);
    const prefix = hiddenRefPrefix(path.basename(workspace.dir));
    expect(await git(repo, 'for-each-ref', '--format=%(refname)', prefix)).toBe(second.git!.ref);
    expect(second.git!.ref).not.toBe(first.git!.ref);
    await removeRunWorkspace(root, workspace.dir, true);
    expect(await git(repo, 'for-each-ref', '--format=%(refname)', prefix)).toBe('');
  });

  test('a checkpoint whose files would be larger written out than the cap is refused, however well they compress, and the one before is kept', async () => {
    const workspace = await openAndWork();
    const target: CheckpointTarget = { runId: RUN, workspacesRoot: root, workspace, kind: 'git', repo };
    const kept = await takeCheckpoint(options, target, 'before');
    // 8 MiB of zeros, no disk space of its own: git's bundle of it is about 8 KiB, far under the 4 MiB cap.
    await writeFile(path.join(workspace.dir, 'zeros.bin'), '');
    await truncate(path.join(workspace.dir, 'zeros.bin'), 8 * 1024 * 1024);
    const err = await takeCheckpoint({ ...options, maxBytes: 4 * 1024 * 1024 }, target, 'test').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointTooLargeError);
    // The zeros and the few small files the stage changed.
    const held = Number(/the files changed since its base commit hold (\d+) bytes/.exec((err as Error).message)?.[1]);
    expect(held - 8 * 1024 * 1024).toBeGreaterThan(0);
    expect(held - 8 * 1024 * 1024).toBeLessThan(1024);
    expect((err as Error).message).toContain('AGENT_PIPELINE_CHECKPOINT_MAX_BYTES=4194304');
    expect(await git(workspace.dir, 'for-each-ref', '--format=%(refname)', 'refs/agent-pipeline/')).toContain(kept.git!.ref);
  });

  test('a checkpoint naming another branch than the run\'s is refused: a restore never creates or moves another branch', async () => {
    const workspace = await openAndWork();
    await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'git', repo }, 'test');
    await loseHost(workspace);
    const before = await git(repo, 'for-each-ref', '--format=%(refname) %(objectname)', 'refs/heads/');
    const failure = expectFailure(await restoreIfNeeded(options, { ...place(), branch: 'main' }).catch((e: unknown) => e), 'WORKSPACE_ERROR');
    expect(failure.message).toContain(`it names the branch ${branch}, but the run's branch is main`);
    expect(await git(repo, 'for-each-ref', '--format=%(refname) %(objectname)', 'refs/heads/')).toBe(before);
  });

  test('a worker whose workspaces folder differs from the one the checkpoint was taken in refuses the run, naming both', async () => {
    const workspace = await openAndWork();
    await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'git', repo }, 'test');
    const elsewhere = path.join(scratch, 'other-workspaces');
    const err = await restoreIfNeeded(options, { ...place(), workspacesRoot: elsewhere }).catch((e: unknown) => e);
    const failure = expectFailure(err, 'CONFIG_INVALID');
    expect(failure.message).toContain(workspace.dir);
    expect(failure.message).toContain(elsewhere);
    expect(failure.message).toContain(`AGENT_PIPELINE_WORKSPACES=${root}`);
  });
});

describe('a plain run folder', () => {
  const place = (): RestorePlace => ({ runId: RUN, workspacesRoot: root, kind: 'folder', stageId: 'build' });

  async function openAndWork(): Promise<RunWorkspace> {
    const workspace = await openRunWorkspace(root, { runId: RUN });
    await mkdir(path.join(workspace.dir, 'docs', 'deep'), { recursive: true });
    await writeFile(path.join(workspace.dir, 'docs', 'deep', 'a.md'), 'deep\n');
    await writeFile(path.join(workspace.dir, '-rf'), 'a name like an option\n');
    await symlink('/etc', path.join(workspace.dir, 'etc-link'));
    await writeSession(workspace);
    return workspace;
  }

  test('comes back whole, links stored as links and never followed', async () => {
    const workspace = await openAndWork();
    await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'folder' }, 'test');
    await loseHost(workspace);
    expect(await restoreIfNeeded(options, place())).toBeDefined();
    expect(await readFile(path.join(workspace.dir, 'docs', 'deep', 'a.md'), 'utf8')).toBe('deep\n');
    expect(await readFile(path.join(workspace.dir, '-rf'), 'utf8')).toBe('a name like an option\n');
    expect(await readlink(path.join(workspace.dir, 'etc-link'))).toBe('/etc');
    expect(await readFile(path.join(workspace.bookkeeping, SESSION), 'utf8')).toBe('{"turn":1}\n{"turn":2}\n');
  });

  test("of a run under an id another run had are its own: a host that lost it restores its checkpoint, never the other run's newer one", async () => {
    const run = { runId: RUN, firstExecutionRunId: 'the-later-run' };
    const workspace = await openRunWorkspace(root, run);
    await writeFile(path.join(workspace.dir, 'mine.txt'), "the later run's\n");
    await takeCheckpoint(options, { ...run, workspacesRoot: root, workspace, kind: 'folder' }, 'test');
    // A run of the same id that named no first execution (an earlier release's) checkpoints after it.
    const other = await openAndWork();
    await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace: other, kind: 'folder' }, 'test');
    await loseHost(workspace);
    const restored = await restoreIfNeeded(options, { ...place(), ...run });
    expect(restored?.manifest.runDir).toBe(workspace.dir);
    expect(await readFile(path.join(workspace.dir, 'mine.txt'), 'utf8')).toBe("the later run's\n");
    expect(existsSync(path.join(workspace.dir, 'docs'))).toBe(false);
    expect(await listCheckpoints(options.store, run)).toHaveLength(1);
    expect(await listCheckpoints(options.store, { runId: RUN })).toHaveLength(1);
  });

  test('a checkpoint whose object does not match its manifest is refused, and nothing is restored', async () => {
    const workspace = await openAndWork();
    const manifest = await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'folder' }, 'test');
    await loseHost(workspace);
    const objects = await readdir(path.join(storeDir, 'runs'), { recursive: true });
    const archive = objects.find((o) => o.endsWith(path.join(manifest.id, 'workspace.tar')))!;
    await writeFile(path.join(storeDir, 'runs', archive), 'tampered');
    const failure = expectFailure(await restoreIfNeeded(options, place()).catch((e: unknown) => e), 'WORKSPACE_ERROR');
    expect(failure.message).toContain('workspace.tar has sha256');
    expect(existsSync(workspace.dir)).toBe(false);
    expect(existsSync(workspace.bookkeeping)).toBe(false);
  });

  test('a host whose copy is older than the newest checkpoint (another worker ran the run since) gets the newest', async () => {
    const workspace = await openAndWork();
    const target: CheckpointTarget = { runId: RUN, workspacesRoot: root, workspace, kind: 'folder' };
    await takeCheckpoint(options, target, 'test');
    const older = await readFile(path.join(workspace.bookkeeping, 'checkpoint.json'));
    await writeFile(path.join(workspace.dir, 'docs', 'deep', 'a.md'), 'newer\n');
    await takeCheckpoint(options, target, 'test');
    // This host's copy: as it was at the first checkpoint.
    await writeFile(path.join(workspace.dir, 'docs', 'deep', 'a.md'), 'older\n');
    await writeFile(path.join(workspace.bookkeeping, 'checkpoint.json'), older);
    expect(await restoreIfNeeded(options, place())).toBeDefined();
    expect(await readFile(path.join(workspace.dir, 'docs', 'deep', 'a.md'), 'utf8')).toBe('newer\n');
  });

  test('an attempt is checkpointed when its stage first starts, every `every` while it runs, and when it ends', async () => {
    const workspace = await openAndWork();
    const reasons = async () => {
      const ids = await listCheckpoints(options.store, { runId: RUN });
      const read = async (id: string) => (JSON.parse(Buffer.from((await options.store.get(checkpointKey({ runId: RUN }, id, MANIFEST_OBJECT), 1e6))!).toString()) as { reason: string }).reason;
      return Promise.all(ids.map(read));
    };
    const checkpoints = new AttemptCheckpoints(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'folder' }, 300);
    await checkpoints.start(true);
    await vi.waitFor(async () => expect(await reasons()).toEqual(['start', 'periodic']), { timeout: 20_000, interval: 50 });
    expect(await checkpoints.end()).toEqual({ warnings: [] });
    expect((await reasons()).at(-1)).toBe('end');
  });

  test("a stage's first start is checkpointed before its agent starts, and kept while later checkpoints replace the others", async () => {
    const workspace = await openAndWork();
    const target: CheckpointTarget = { runId: RUN, workspacesRoot: root, workspace, kind: 'folder' };
    const checkpoints = new AttemptCheckpoints(options, target, 60_000);
    await checkpoints.start(true, 'build');
    // Written when start() resolves: the agent, started after it, has changed nothing of what a fork starts from.
    const first = await findStageStartCheckpoint(options.store, { runId: RUN }, 'build');
    expect(first).toMatchObject({ runId: RUN, reason: 'start', stage: 'build' });
    expect(await checkpoints.end()).toEqual({ warnings: [] });
    for (let i = 0; i < 3; i++) {
      // Whole archives (as on a host with no record of what it archived): no bookkeeping chain keeps older ones.
      await rm(path.join(workspace.bookkeeping, ARCHIVED_FILES_RECORD), { force: true });
      await takeCheckpoint(options, target, 'periodic');
    }
    expect(await findStageStartCheckpoint(options.store, { runId: RUN }, 'build')).toEqual(first);
    // The two newest, and the stage's first start.
    expect(await listCheckpoints(options.store, { runId: RUN })).toHaveLength(3);
    expect(await findStageStartCheckpoint(options.store, { runId: RUN }, 'review')).toBeUndefined();
  });

  test('a checkpoint over the size cap fails naming the cap and its setting', async () => {
    const workspace = await openAndWork();
    await writeFile(path.join(workspace.dir, 'big.bin'), Buffer.alloc(4096));
    const target: CheckpointTarget = { runId: RUN, workspacesRoot: root, workspace, kind: 'folder' };
    const err = await takeCheckpoint({ ...options, maxBytes: 1024 }, target, 'test').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointTooLargeError);
    expect((err as Error).message).toContain('AGENT_PIPELINE_CHECKPOINT_MAX_BYTES=1024');
  });
});
