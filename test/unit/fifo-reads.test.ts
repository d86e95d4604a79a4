import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { describe, expect, onTestFinished, test } from 'vitest';
import { createRunBundle } from '../../src/bundle/create-run-bundle.js';
import { WarmPool } from '../../src/activities/backends/claude-cli/warm-pool.js';
import { copyBookkeeping, listBookkeeping } from '../../src/activities/checkpoint/bookkeeping-copy.js';
import { describeFile } from '../../src/activities/checkpoint/manifest.js';
import { runConfined } from '../../src/activities/process/confined.js';
import { watchFifoWait } from '../../src/activities/process/fifo-wait.js';
import { readPipelineText } from '../../src/activities/prompt/pipeline-file.js';
import { git as workerGit, pinWorktree } from '../../src/activities/workspace/git.js';
import { readInputValues } from '../../src/library/input-files.js';
import { validatePipelineFile } from '../../src/library/validate-pipeline.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { countHungReads, startFifoSwapper } from '../helpers/fifo-swapper.js';
import { git, initRepo } from '../helpers/git-repo.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { testFolder } from '../helpers/test-folder.js';

/*
 * Every read of a file whose path a run (or a pipeline's folder) controls checks the handle it opened, without waiting
 * on a FIFO: a FIFO's open without O_NONBLOCK waits for a writer on one of libuv's four threads, so the read hangs and
 * a few such reads stall every file read of the process. Each case here hung before its read was made so.
 */

/** A FIFO at `file`; when the test ends, any open of it still waiting is released (a writer opens and closes it). */
function makeFifo(file: string): string {
  execFileSync('mkfifo', [file]);
  onTestFinished(() => {
    try {
      closeSync(openSync(file, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // ENXIO: nobody waits on it.
    }
  });
  return file;
}

/** Fails the test instead of waiting for ever. */
function within<T>(promise: Promise<T>, ms = 5_000): Promise<T> {
  return Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms).unref())]);
}

describe('a FIFO where a file is read', () => {
  test('a context file that is a FIFO fails the bundle at once (FILE_UNREADABLE), naming the file and the field', async () => {
    const dir = await testFolder('fifo-bundle-');
    const file = path.join(dir, 'pipeline.yaml');
    const yaml = 'name: p\ncontext: [brief.md]\nstages:\n  - id: one\n    prompt: Go.\n';
    await writeFile(file, yaml);
    makeFifo(path.join(dir, 'brief.md'));
    await expect(within(createRunBundle(file, parsePipeline(yaml, file)))).rejects.toThrow(
      `[FILE_UNREADABLE] cannot bundle ${path.join(dir, 'brief.md')} (\`context[0]\` in ${file}): it is not a regular file`,
    );
  });

  test('validate reports a step file that is a FIFO instead of waiting on it', async () => {
    const dir = await testFolder('fifo-validate-');
    const file = path.join(dir, 'pipeline.yaml');
    await writeFile(file, 'name: p\nstages:\n  - id: one\n    prompt: steps/one.md\n');
    await mkdir(path.join(dir, 'steps'));
    makeFifo(path.join(dir, 'steps', 'one.md'));
    const report = await within(validatePipelineFile(file));
    expect(JSON.stringify(report)).toContain(`prompt file ${path.join(dir, 'steps', 'one.md')} is not a regular file`);
  });

  test("a checkpoint object that is a FIFO is refused, not hashed for ever", async () => {
    const dir = await testFolder('fifo-manifest-');
    await expect(within(describeFile(makeFifo(path.join(dir, 'workspace.tar'))))).rejects.toMatchObject({ code: 'ENOTREG' });
  });

  test("a warm agent's start-up file left as a FIFO in the workspace (CLAUDE.md) is hashed as no file", async () => {
    const dir = await testFolder('fifo-warm-');
    const memory = makeFifo(path.join(dir, 'CLAUDE.md'));
    const pool = new WarmPool({ ttlMs: 60_000, killGraceMs: 500, limit: 2 });
    const launch = { binary: 'sleep', args: ['30'], cwd: dir, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, sessionId: 's', marker: 'm' };
    expect(await within(pool.spawn('key', launch, [memory]))).toBe(true);
    // Hashed again when the stage takes the process: still no file, so unchanged, and taken.
    const taken = await within(pool.take('key', launch));
    expect(taken.kind).toBe('adopted');
    if (taken.kind === 'adopted') taken.child.kill('SIGKILL');
  });

  test('a bookkeeping file replaced by a FIFO after the listing is left out of the copy', async () => {
    const dir = await testFolder('fifo-bookkeeping-');
    const bookkeeping = path.join(dir, 'bookkeeping');
    await mkdir(path.join(bookkeeping, 'stages'), { recursive: true });
    await writeFile(path.join(bookkeeping, 'stages', 'log.jsonl'), '{}\n');
    await writeFile(path.join(bookkeeping, 'run.json'), '{}\n');
    const listing = await listBookkeeping(bookkeeping, 1024 * 1024);
    await rm(path.join(bookkeeping, 'stages', 'log.jsonl'));
    makeFifo(path.join(bookkeeping, 'stages', 'log.jsonl'));
    const into = path.join(dir, 'copy');
    await mkdir(into);
    await within(copyBookkeeping(bookkeeping, into, listing, listing.entries));
    expect((await readdir(into, { recursive: true })).sort()).toEqual(['run.json', 'stages']);
  });

  test.skipIf(MISSING_SANDBOX_PACKAGES.includes('bubblewrap'))(
    'a program run confined that waits to open a FIFO is found below bubblewrap, and it is the one stopped',
    { timeout: 30_000 },
    async () => {
      const dir = await testFolder('fifo-confined-');
      const fifo = makeFifo(path.join(dir, 'pipe'));
      let stopped: number | undefined;
      let spawned: number | undefined;
      const result = await within(
        runConfined('cat', [fifo], { readOnly: [dir] }, (file, args) => {
          const child = execa(file, args, { reject: false, stdin: 'ignore' });
          spawned = child.pid;
          const watch = watchFifoWait(child.pid, (waiting) => process.kill((stopped = waiting), 'SIGTERM'), 100);
          return child.finally(() => watch.stop());
        }),
        20_000,
      );
      expect(result.failed).toBe(true);
      expect(stopped).toBeDefined();
      // cat, not bubblewrap: SIGTERM reaches the program that waits, which can clean up (git removes its locks).
      expect(stopped).not.toBe(spawned);
    },
  );
});

describe('a file swapped for a FIFO between the check of its path and the read', () => {
  test('a pipeline file is read from the handle it checked', { timeout: 60_000 }, async () => {
    const root = path.join(await testFolder('fifo-swap-pipeline-'), 'bundle');
    await mkdir(path.join(root, 'steps'), { recursive: true });
    const file = path.join(root, 'steps', 'one.md');
    await writeFile(file, 'Step.\n');
    const { hung, settled } = await countHungReads(file, 'Step.\n', () => readPipelineText(root, 'steps/one.md'));
    expect({ hung, settled }).toEqual({ hung: 0, settled: 200 });
  });

  test('an input file is read from the handle it checked', { timeout: 60_000 }, async () => {
    const dir = path.join(await testFolder('fifo-swap-input-'), 'inputs');
    await mkdir(dir);
    const file = path.join(dir, 'brief.txt');
    await writeFile(file, 'brief\n');
    const { hung, settled } = await countHungReads(file, 'brief\n', () => readInputValues({ brief: { file } }));
    expect({ hung, settled }).toEqual({ hung: 0, settled: 200 });
  });

  test("a worktree's record in its repository is read from the handle it checked", { timeout: 120_000 }, async () => {
    const dir = await testFolder('fifo-swap-worktree-');
    const repo = path.join(dir, 'repo');
    const worktree = path.join(dir, 'worktree');
    await initRepo(repo, { 'a.txt': 'a\n' });
    await git(repo, 'worktree', 'add', '--quiet', '-b', 'run', worktree);
    const record = path.join(repo, '.git', 'worktrees', 'worktree', 'gitdir');
    const { hung } = await countHungReads(record, `${path.join(worktree, '.git')}\n`, () => pinWorktree(worktree, repo, 'stage'), 100);
    expect(hung).toBe(0);
  });

  test("git staging a worktree is stopped, not left waiting, when it opens a file swapped for a FIFO", { timeout: 240_000 }, async () => {
    const dir = await testFolder('fifo-swap-git-');
    const repo = path.join(dir, 'repo');
    await initRepo(repo, { 'a.txt': 'a\n' });
    // As a checkpoint stages a worktree: with an index of its own, so that every file is read again. git looks at the
    // file, then opens it by its path: about one add in a hundred meets the FIFO there. Until one did, or 2,000 adds.
    const swapper = await startFifoSwapper(path.join(repo, 'x'), 'x\n');
    let stopped = 0;
    let hung = 0;
    try {
      for (let i = 0; i < 2_000 && stopped === 0 && hung === 0; i++) {
        const add = workerGit(repo, ['add', '--all', '--', '.'], 'local', { GIT_INDEX_FILE: path.join(dir, `index-${i}`) });
        const result = await Promise.race([add, new Promise<'hung'>((resolve) => setTimeout(resolve, 10_000, 'hung').unref())]);
        if (result === 'hung') hung++;
        else if (result.failed && String(result.stderr).includes('git was stopped: it waited to open a FIFO')) stopped++;
      }
    } finally {
      await swapper.stop();
    }
    expect({ hung, stopped }).toEqual({ hung: 0, stopped: 1 });
  });
});
