import { execa } from 'execa';
import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { restoreIfNeeded } from '../../src/activities/checkpoint/restore-checkpoint.js';
import type { CheckpointOptions } from '../../src/activities/checkpoint/settings.js';
import { finishRestore } from '../../src/activities/checkpoint/stage-checkpoints.js';
import { takeCheckpoint } from '../../src/activities/checkpoint/take-checkpoint.js';
import { openRunWorkspace } from '../../src/activities/workspace/run-workspace.js';
import { FileStore } from '../../src/store/file-store.js';
import type { BenchmarkResult } from '../lib/results.js';
import type { BenchStack } from '../lib/stack.js';
import { elapsedMs, median, round } from '../lib/stats.js';

/** The repository: 500 files of 100 KB of random bytes (incompressible: the worst case for a bundle). */
const REPO_FILES = 500;
const FILE_BYTES = 100 * 1024;
/** git compares a file's mtime with its index's to the second: a file written within it is hashed again. @unit ms */
const RACY_WINDOW_MS = 1_100;

async function git(cwd: string, ...args: string[]): Promise<string> {
  return (await execa('git', ['-c', 'user.name=bench', '-c', 'user.email=bench@localhost', ...args], { cwd })).stdout;
}

async function makeRepo(repo: string): Promise<void> {
  await mkdir(repo, { recursive: true });
  await git(repo, 'init', '--quiet', '--initial-branch', 'main');
  for (let i = 0; i < REPO_FILES; i += 1) {
    await mkdir(path.join(repo, `dir-${i % 20}`), { recursive: true });
    await writeFile(path.join(repo, `dir-${i % 20}`, `file-${i}.bin`), randomBytes(FILE_BYTES));
  }
  await git(repo, 'add', '.');
  await git(repo, 'commit', '--quiet', '-m', 'initial');
}

/**
 * A checkpoint and a restore of a run whose worktree is a 50 MB repository with a 100 KB change: the time the
 * worker spends on each (in this process, as the stage activity would), and the bytes written to a folder store.
 */
export async function benchCheckpoints(stack: BenchStack, rounds: number): Promise<BenchmarkResult> {
  const base = await stack.folder('checkpoints');
  const repo = path.join(base, 'repo');
  const root = path.join(base, 'workspaces');
  await makeRepo(repo);
  const options: CheckpointOptions = { store: new FileStore(path.join(base, 'store')), everyMs: 60_000, maxBytes: 2 * 1024 ** 3 };
  const takeMs: number[] = [];
  const firstMs: number[] = [];
  const restoreMs: number[] = [];
  const bytes: number[] = [];
  for (let r = 0; r < rounds; r += 1) {
    const runId = `bench-checkpoint-${r}`;
    const git = { repo, branch: `agent/${runId}` };
    const workspace = await openRunWorkspace(root, { runId }, { git });
    const checkedOutAt = Date.now();
    await writeFile(path.join(workspace.dir, 'change.bin'), randomBytes(FILE_BYTES));
    const firstStart = process.hrtime.bigint();
    await takeCheckpoint(options, { runId, workspacesRoot: root, workspace, kind: 'git', repo }, 'warm-up');
    firstMs.push(elapsedMs(firstStart));
    // A stage's checkpoints come after the checkout by more than git's racy window (files as new as the index, to the
    // second, are hashed again whatever their stat says): wait it out, as any later checkpoint of a run has.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, checkedOutAt + RACY_WINDOW_MS - Date.now())));
    await writeFile(path.join(workspace.dir, 'change.bin'), randomBytes(FILE_BYTES));
    const takeStart = process.hrtime.bigint();
    const manifest = await takeCheckpoint(options, { runId, workspacesRoot: root, workspace, kind: 'git', repo }, 'bench');
    takeMs.push(elapsedMs(takeStart));
    bytes.push(Object.values(manifest.objects).reduce((sum, o) => sum + o.bytes, 0));
    await rm(workspace.dir, { recursive: true, force: true });
    await rm(workspace.bookkeeping, { recursive: true, force: true });
    const restoreStart = process.hrtime.bigint();
    const restored = await restoreIfNeeded(options, { runId, workspacesRoot: root, kind: 'git', repo, branch: git.branch, stageId: 'bench' });
    await finishRestore(restored, await openRunWorkspace(root, { runId }, { git }));
    restoreMs.push(elapsedMs(restoreStart));
  }
  const take = round(median(takeMs));
  const restore = round(median(restoreMs));
  return {
    name: 'checkpoints',
    title: 'Checkpoints',
    method: `A run's worktree of a ${round((REPO_FILES * FILE_BYTES) / 1024 ** 2, 0)} MB repository (${REPO_FILES} random files) with a 100 KB uncommitted change, checkpointed into a folder store (bundle relative to the base + bookkeeping archive + manifest), then its folder and bookkeeping deleted and restored (worktree checked out again). Medians.`,
    repetitions: rounds,
    headline: `checkpoint ${take} ms, ${round(median(bytes) / 1024)} KB; restore ${restore} ms`,
    goal: { text: 'checkpoint ≤ 300 ms, restore ≤ 3 s', met: take <= 300 && restore <= 3_000 },
    figures: {
      checkpointMs: take,
      checkpointBytes: median(bytes),
      restoreMs: restore,
      checkpointMsEach: takeMs.map((ms) => round(ms)),
      restoreMsEach: restoreMs.map((ms) => round(ms)),
      firstCheckpointAfterCheckoutMs: round(median(firstMs)),
    },
    notes: [
      'The restore includes `git worktree add` of the whole 50 MB tree; the checkpoint copies the agent\'s index so unchanged files are not hashed again.',
      `A checkpoint within the second of the checkout (a run's very first stage start) hashes the whole tree again, since git cannot trust the stat of files as new as its index: ${round(median(firstMs))} ms (median; not the goal's figure).`,
    ],
    durationS: 0,
  };
}
