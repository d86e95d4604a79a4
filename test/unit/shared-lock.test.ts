import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { withLock } from '../../src/activities/workspace/keyed-lock.js';
import { withSharedLock } from '../../src/activities/workspace/shared-lock.js';

/*
 * The lock that holds across the worker processes sharing a workspaces folder, within one process: one holder at a
 * time, a wait that stops when cancelled, and a lock this process holds never taken for a gone holder's; and the
 * in-process turns it takes first (keyed-lock.ts, which the workers' git and checkpoints use too).
 * test/integration/shared-lock-processes.test.ts has holders in other processes, one of them SIGKILLed.
 */

let root: string;
let lockDir: string;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-shared-lock-'));
  lockDir = path.join(root, 'restore-x');
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A promise and the function that settles it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe('a lock shared by the worker processes of one workspaces folder', () => {
  test('has one holder at a time; the next one waits, then holds it; the last release removes it', async () => {
    const events: string[] = [];
    const first = gate();
    const firstIn = gate();
    const waiting = gate();
    const holding = withSharedLock(lockDir, async () => {
      events.push('first in');
      firstIn.open();
      await first.opened;
      events.push('first out');
      return 1;
    });
    const next = withSharedLock(
      lockDir,
      async () => {
        events.push('next in');
        return 2;
      },
      { onWait: () => waiting.open() },
    );
    await Promise.all([firstIn.opened, waiting.opened]);
    // The record names its holder for those who wait.
    expect(JSON.parse(await readFile(path.join(lockDir, 'holder.json'), 'utf8'))).toMatchObject({ pid: process.pid });
    first.open();
    expect(await Promise.all([holding, next])).toEqual([1, 2]);
    expect(events).toEqual(['first in', 'first out', 'next in']);
    expect(existsSync(lockDir)).toBe(false);
  });

  test('a wait stops when its attempt is cancelled, with the cancellation, and never holds the lock', async () => {
    const held = gate();
    const holding = withSharedLock(lockDir, () => held.opened);
    const cancel = new AbortController();
    const reason = new Error('the attempt was cancelled');
    let ran = false;
    const waiting = gate();
    const waiter = withSharedLock(
      lockDir,
      async () => {
        ran = true;
      },
      { signal: cancel.signal, onWait: () => waiting.open() },
    );
    await waiting.opened;
    cancel.abort(reason);
    await expect(waiter).rejects.toBe(reason);
    held.open();
    await holding;
    expect(ran).toBe(false);
  });

  test('a lock this process holds is never taken for a gone holder’s, however long its record stays unchanged', async () => {
    const held = gate();
    let tookOver = false;
    // The holder keeps its record fresh every 2 s (its staleMs, 20 s, by default); the waiter would take a record
    // unchanged for 300 ms for a gone holder's, as when this process froze: here it is known to be alive.
    const holding = withSharedLock(lockDir, () => held.opened);
    const waiting = gate();
    let done = false;
    const waiter = withSharedLock(lockDir, async () => (done = true), { staleMs: 300, pollMs: 20, onWait: () => waiting.open(), onTakeOver: () => (tookOver = true) });
    await waiting.opened;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect({ tookOver, done }).toEqual({ tookOver: false, done: false });
    held.open();
    await holding;
    expect(await waiter).toBe(true);
  });
});

describe('one call at a time per key in this process', () => {
  test('runs calls in order, each after the one before ended, a failed one included', async () => {
    const events: string[] = [];
    const first = gate();
    const a = withLock('k', async () => {
      events.push('a in');
      await first.opened;
      events.push('a out');
      throw new Error('a failed');
    });
    const b = withLock('k', async () => {
      events.push('b');
      return 'b';
    });
    const other = withLock('other key', async () => events.push('other'));
    await other;
    first.open();
    await expect(a).rejects.toThrow('a failed');
    expect(await b).toBe('b');
    expect(events).toEqual(['a in', 'other', 'a out', 'b']);
  });

  test('a cancelled wait rejects with its reason, never runs, and the call after it still waits for the one before', async () => {
    const events: string[] = [];
    const first = gate();
    const queued: string[] = [];
    const a = withLock('c', async () => {
      await first.opened;
      events.push('a');
    });
    const cancel = new AbortController();
    const reason = new Error('cancelled');
    const b = withLock('c', async () => events.push('b'), { signal: cancel.signal, onQueued: () => queued.push('b') });
    const c = withLock('c', async () => events.push('c'));
    cancel.abort(reason);
    await expect(b).rejects.toBe(reason);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(events).toEqual([]);
    first.open();
    await Promise.all([a, c]);
    expect(events).toEqual(['a', 'c']);
    expect(queued).toEqual(['b']);
  });

  test('starts a call after the caller\'s own synchronous code, even with the key free', async () => {
    let ready = false;
    const call = withLock('d', async () => ready);
    ready = true;
    expect(await call).toBe(true);
  });
});
