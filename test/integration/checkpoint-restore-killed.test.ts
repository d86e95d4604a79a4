import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { readCheckpointMarker, readRestoreRecord } from '../../src/activities/checkpoint/marker.js';
import type { CheckpointManifest } from '../../src/activities/checkpoint/manifest.js';
import { restoreIfNeeded, type RestorePlace } from '../../src/activities/checkpoint/restore-checkpoint.js';
import type { CheckpointOptions } from '../../src/activities/checkpoint/settings.js';
import { finishRestore } from '../../src/activities/checkpoint/stage-checkpoints.js';
import { takeCheckpoint } from '../../src/activities/checkpoint/take-checkpoint.js';
import { runPaths } from '../../src/activities/workspace/run-folder.js';
import { openRunWorkspace, type OpenRunOptions, type RunWorkspace } from '../../src/activities/workspace/run-workspace.js';
import { FileStore } from '../../src/store/file-store.js';
import { git, initRepo } from '../helpers/git-repo.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/*
 * A restore whose worker is killed part-way (SIGKILL, a lost machine), at every point where it changes something:
 * the restore runs in a process of its own (the built modules, as a worker runs them, on real tar, real git and a
 * folder store), which its own debugger stops dead at the k-th call that may change what the host has of the run
 * (fs/promises' rename, rm, writeFile and mkdir of a missing folder, outside the attempt's scratch folder;
 * child_process' spawn of a git that writes), for k = 1, 2, … until one restore runs to its end. After each kill, the next attempt on the host must find either nothing restored, or the restore whole
 * and marked: it restores the run (and tells its agent) unless the killed one had finished, and the host then holds
 * the checkpoint, its marker and the restore record. A copy the next attempt took for current, half restored or
 * unmarked (never to be found older later, its agent never told), fails.
 */

const DIST = path.join(PROJECT_ROOT, 'dist');
/** Stops the process it runs in at the `workerData`-th of those calls (`changesHost` says which count), and kills it there. */
const KILLER = `
const { parentPort, workerData } = process.getBuiltinModule('node:worker_threads');
const { Session } = process.getBuiltinModule('node:inspector');
const session = new Session();
session.connectToMainThread();
// An inspector session's replies keep no thread alive.
setInterval(() => {}, 60_000);
const post = (method, params) => new Promise((resolve, reject) => session.post(method, params, (err, result) => (err ? reject(err) : resolve(result))));
session.on('Debugger.paused', () => process.kill(process.pid, 'SIGKILL'));
(async () => {
  await post('Debugger.enable');
  await post('Runtime.evaluate', { expression: 'globalThis.changes = 0' });
  for (const [module, name] of [['node:fs/promises', 'mkdir'], ['node:fs/promises', 'rename'], ['node:fs/promises', 'rm'], ['node:fs/promises', 'writeFile'], ['node:child_process', 'spawn']]) {
    const { result } = await post('Runtime.evaluate', { expression: "process.getBuiltinModule('" + module + "')." + name });
    const condition = "globalThis.changesHost('" + name + "', arguments) && ++globalThis.changes === " + workerData;
    await post('Debugger.setBreakpointOnFunctionCall', { objectId: result.objectId, condition });
  }
  parentPort.postMessage('ready');
})();
`;
/** An attempt's restore, as restoreBeforeAttempt runs it; says how many of those calls it made. */
const ATTEMPT = `
const [dist, json] = process.argv.slice(1);
const { kill, storeDir, place, root, open } = JSON.parse(json);
const { restoreIfNeeded } = await import(dist + '/activities/checkpoint/restore-checkpoint.js');
const { FileStore } = await import(dist + '/store/file-store.js');
const { Worker } = await import('node:worker_threads');
// What the attempt does in its own scratch folder (downloads, archives unpacked aside), a folder made that was there,
// and a git that only reads, change nothing of the host's.
const scratch = root + '/.agent-pipeline/scratch';
const outside = (file) => String(file) !== scratch && !String(file).startsWith(scratch + '/');
const { existsSync } = await import('node:fs');
const gitWrites = (argv) => {
  const [command, sub] = argv.filter((arg) => !arg.startsWith('-') && !arg.includes('='));
  return !['rev-parse', 'check-ref-format', 'merge-base'].includes(command) && !(command === 'bundle' && sub === 'verify');
};
globalThis.changesHost = (name, args) =>
  name === 'spawn' ? String(args[0]).endsWith('git') && gitWrites(args[1]) : name === 'rename' ? outside(args[0]) || outside(args[1]) : outside(args[0]) && !(name === 'mkdir' && existsSync(args[0]));
const killer = new Worker(${JSON.stringify(KILLER)}, { eval: true, workerData: kill });
const wait = setInterval(() => {}, 60_000);
await new Promise((resolve, reject) => { killer.once('message', resolve); killer.once('error', reject); });
clearInterval(wait);
killer.unref();
const options = { store: new FileStore(storeDir), everyMs: 60_000, maxBytes: 64 * 1024 * 1024 };
const restored = await restoreIfNeeded(options, place);
if (restored?.manifest.git?.work) {
  const { finishRestore } = await import(dist + '/activities/checkpoint/stage-checkpoints.js');
  const { openRunWorkspace } = await import(dist + '/activities/workspace/run-workspace.js');
  await finishRestore(restored, await openRunWorkspace(root, place, open));
}
process.stdout.write(JSON.stringify({ changes: globalThis.changes }));
process.exit(0);
`;

const RUN = 'ckpt/killed';
const SESSION = 'claude/projects/-w/session-1.jsonl';

let scratch: string;
/** What the host holds: the workspaces root and, for a git run, the repository. */
let host: string;
let root: string;
let options: CheckpointOptions;

beforeEach(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-restore-killed-'));
  host = path.join(scratch, 'host');
  root = path.join(host, 'workspaces');
  options = { store: new FileStore(path.join(scratch, 'store')), everyMs: 60_000, maxBytes: 64 * 1024 * 1024 };
});
afterEach(async () => {
  await rm(scratch, { recursive: true, force: true });
});

/** One kind of run and host, the checkpoint to restore, and what the host holds once it is restored. */
interface Case {
  place: RestorePlace;
  open: OpenRunOptions;
  manifest: CheckpointManifest;
  /** Whether the run's folder holds the checkpoint's files. */
  hasFiles: (dir: string) => Promise<boolean>;
}

async function writeSession(workspace: RunWorkspace, text: string): Promise<void> {
  await mkdir(path.dirname(path.join(workspace.bookkeeping, SESSION)), { recursive: true });
  await writeFile(path.join(workspace.bookkeeping, SESSION), text);
}

const read = (file: string) => readFile(file, 'utf8').catch(() => undefined);

/** The host holds the checkpoint, marked as its copy, with the record that tells the stage's attempt of the restore. */
async function restoredWhole(c: Case): Promise<boolean> {
  const workspace = runPaths(root, c.place);
  const [marker, record] = await Promise.all([readCheckpointMarker(workspace.bookkeeping), readRestoreRecord(workspace.bookkeeping)]);
  return (
    marker?.id === c.manifest.id &&
    record?.id === c.manifest.id &&
    JSON.stringify(record.stages) === '["build"]' &&
    record.work === undefined &&
    (await read(path.join(workspace.bookkeeping, SESSION))) === '{"turn":2}\n' &&
    (await c.hasFiles(workspace.dir))
  );
}

/**
 * Restores the case's host, from what it holds now (saved aside and put back before each), once killed at each point
 * the restore changes something at; after each, runs the next attempt in this process and checks what it found and
 * left. @returns how many such points there were
 */
async function killAtEveryChange(c: Case): Promise<number> {
  const before = path.join(scratch, 'host-before');
  await cp(host, before, { recursive: true, verbatimSymlinks: true });
  for (let kill = 1; ; kill++) {
    await rm(host, { recursive: true, force: true });
    await cp(before, host, { recursive: true, verbatimSymlinks: true });
    const args = { kill, storeDir: path.join(scratch, 'store'), place: c.place, root, open: c.open };
    const attempt = await execa('node', ['--input-type=module', '-e', ATTEMPT, DIST, JSON.stringify(args)], { reject: false, all: true, timeout: 120_000 });
    if (attempt.exitCode === 0) {
      expect(await restoredWhole(c), 'an attempt not killed restores the run whole').toBe(true);
      return kill - 1;
    }
    expect(attempt.signal, `the attempt to be killed at change ${kill} ended otherwise: ${attempt.all}`).toBe('SIGKILL');
    const wholeBefore = await restoredWhole(c);
    const next = await restoreIfNeeded(options, c.place);
    if (next?.manifest.git?.work) await finishRestore(next, await openRunWorkspace(root, c.place, c.open));
    // Told of the restore unless the killed attempt had finished it (and so had written the record that tells it).
    expect(next?.manifest.id, `the attempt after one killed at change ${kill} restored`).toBe(wholeBefore ? undefined : c.manifest.id);
    expect(await restoredWhole(c), `the attempt after one killed at change ${kill} left the run restored and marked`).toBe(true);
  }
}

describe('a restore killed at any point', () => {
  async function folderCase(): Promise<Case & { workspace: RunWorkspace }> {
    const workspace = await openRunWorkspace(root, { runId: RUN });
    await writeFile(path.join(workspace.dir, 'made.txt'), 'checkpointed\n');
    await writeSession(workspace, '{"turn":2}\n');
    const manifest = await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'folder' }, 'periodic');
    const hasFiles = async (dir: string) => (await read(path.join(dir, 'made.txt'))) === 'checkpointed\n';
    return { workspace, manifest, hasFiles, open: {}, place: { runId: RUN, workspacesRoot: root, kind: 'folder', stageId: 'build' } };
  }

  test('of a plain folder on a host that lost the run leaves it unrestored or restored and marked', { timeout: 300_000 }, async () => {
    const c = await folderCase();
    await rm(c.workspace.dir, { recursive: true });
    await rm(c.workspace.bookkeeping, { recursive: true });
    expect(await killAtEveryChange(c)).toBeGreaterThanOrEqual(2);
  });

  test('of a plain folder over an older copy leaves the older copy or the checkpoint restored and marked', { timeout: 300_000 }, async () => {
    const c = await folderCase();
    const target = { runId: RUN, workspacesRoot: root, workspace: c.workspace, kind: 'folder' as const };
    // This host's copy is as it was at the checkpoint before: the run went on on another host since.
    await writeFile(path.join(c.workspace.dir, 'made.txt'), 'older\n');
    await writeSession(c.workspace, '{"turn":1}\n');
    await takeCheckpoint(options, target, 'periodic');
    const older = await readFile(path.join(c.workspace.bookkeeping, 'checkpoint.json'));
    await writeFile(path.join(c.workspace.dir, 'made.txt'), 'checkpointed\n');
    await writeSession(c.workspace, '{"turn":2}\n');
    const manifest = await takeCheckpoint(options, target, 'periodic');
    await writeFile(path.join(c.workspace.dir, 'made.txt'), 'older\n');
    await writeSession(c.workspace, '{"turn":1}\n');
    await writeFile(path.join(c.workspace.bookkeeping, 'checkpoint.json'), older);
    expect(await killAtEveryChange({ ...c, manifest })).toBeGreaterThanOrEqual(4);
  });

  test('of a plain folder on a host that lost only the folder leaves it unrestored or restored and marked', { timeout: 300_000 }, async () => {
    const c = await folderCase();
    await rm(c.workspace.dir, { recursive: true });
    expect(await killAtEveryChange(c)).toBeGreaterThanOrEqual(3);
  });

  test("of a git worktree on a host that lost the run leaves it unrestored or restored and marked, the worktree's work laid out", { timeout: 600_000 }, async () => {
    const repo = path.join(host, 'repo');
    const branch = 'agent/ckpt-killed';
    await initRepo(repo, { 'tracked.txt': 'base\n' });
    const open: OpenRunOptions = { git: { repo, branch } };
    const workspace = await openRunWorkspace(root, { runId: RUN }, open);
    await writeFile(path.join(workspace.dir, 'committed.txt'), 'committed\n');
    await git(workspace.dir, 'add', 'committed.txt');
    await git(workspace.dir, 'commit', '--quiet', '-m', 'a commit of the stage');
    await writeFile(path.join(workspace.dir, 'tracked.txt'), 'changed, not committed\n');
    await writeFile(path.join(workspace.dir, 'untracked.txt'), 'new\n');
    await writeSession(workspace, '{"turn":2}\n');
    const manifest = await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'git', repo }, 'periodic');
    // The host lost the worktree, the bookkeeping, the branch and the checkpoint's ref; the repository keeps its base.
    await rm(workspace.dir, { recursive: true });
    await rm(workspace.bookkeeping, { recursive: true });
    await git(repo, 'worktree', 'prune');
    await git(repo, 'branch', '-D', branch);
    await git(repo, 'update-ref', '-d', manifest.git!.ref);
    const hasFiles = async (dir: string) =>
      existsSync(path.join(dir, '.git')) &&
      (await git(dir, 'log', '-1', '--format=%s').catch(() => '')) === 'a commit of the stage' &&
      (await read(path.join(dir, 'tracked.txt'))) === 'changed, not committed\n' &&
      (await read(path.join(dir, 'untracked.txt'))) === 'new\n';
    const place: RestorePlace = { runId: RUN, workspacesRoot: root, kind: 'git', repo, branch, stageId: 'build' };
    expect(await killAtEveryChange({ place, open, manifest, hasFiles })).toBeGreaterThanOrEqual(6);
  });
});
