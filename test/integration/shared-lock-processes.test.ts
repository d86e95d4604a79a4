import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, test } from 'vitest';
import { withSharedLock, type LockHolder } from '../../src/activities/workspace/shared-lock.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/*
 * The lock the worker processes sharing one workspaces folder hold across processes (the restore of a moved run), with
 * a holder in another real process (the built module, as a worker runs it): while that process lives and keeps its
 * record fresh, a wait in this one never takes the lock over; once it is SIGKILLed, holding the lock (a worker killed
 * mid-restore), the wait takes it over within a bounded time.
 */

const STALE_MS = 3_000;
const MODULE = path.join(PROJECT_ROOT, 'dist', 'activities', 'workspace', 'shared-lock.js');
/** Holds the lock until killed: says `held` once it does, and keeps an event loop alive meanwhile. */
const HOLDER = `
const { withSharedLock } = await import(process.argv[1]);
setInterval(() => {}, 1_000);
await withSharedLock(process.argv[2], async () => {
  process.stdout.write('held\\n');
  await new Promise(() => {});
}, { staleMs: Number(process.argv[3]) });
`;

describe('a lock shared across worker processes', () => {
  test('is waited for while its holder lives, and taken over within a bounded time once the holder is SIGKILLed', { timeout: 120_000 }, async ({ onTestFinished }) => {
    const root = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-shared-lock-processes-'));
    onTestFinished(() => rm(root, { recursive: true, force: true }));
    const lockDir = path.join(root, 'restore-x');
    const holder = execa('node', ['--input-type=module', '-e', HOLDER, MODULE, lockDir, String(STALE_MS)], { reject: false, all: true });
    onTestFinished(() => void holder.kill('SIGKILL'));
    await new Promise<void>((resolve, reject) => {
      holder.stdout?.on('data', (chunk: Buffer) => chunk.toString().includes('held') && resolve());
      void holder.then((result) => reject(new Error(`the holder ended before it held the lock: ${result.all}`)));
    });

    let waitedFor: LockHolder | undefined;
    let tookOverFrom: LockHolder | undefined;
    let heldAt: number | undefined;
    const waiter = withSharedLock(
      lockDir,
      async () => {
        heldAt = performance.now();
        return JSON.parse(await readFile(path.join(lockDir, 'holder.json'), 'utf8')) as LockHolder;
      },
      { staleMs: STALE_MS, onWait: (h) => (waitedFor = h), onTakeOver: (h) => (tookOverFrom = h) },
    );
    // Alive, the holder keeps its record fresh: three times the stale time later, nobody has taken its lock.
    await sleep(3 * STALE_MS);
    expect(waitedFor?.pid).toBe(holder.pid);
    expect(heldAt).toBeUndefined();

    holder.kill('SIGKILL');
    await holder;
    const killedAt = performance.now();
    const record = await waiter;
    expect(tookOverFrom?.pid).toBe(holder.pid);
    expect(record.pid).toBe(process.pid);
    // Taken over once its record had stayed unchanged for the stale time, give or take a refresh and a poll (and a
    // loaded machine's delays).
    expect(heldAt! - killedAt).toBeLessThan(STALE_MS + 10_000);
    expect(existsSync(lockDir)).toBe(false);
  });
});
