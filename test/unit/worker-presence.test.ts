import type { Client } from '@temporalio/client';
import { describe, expect, test } from 'vitest';
import { readWorkerPresence } from '../../src/library/worker-presence.js';

const NOW = 1_800_000_000_000;

/** A client whose task queue lists pollers last seen `agesMs` ago. */
function clientWithPollers(...agesMs: number[]): Client {
  const pollers = agesMs.map((age) => ({ identity: `w${age}`, lastAccessTime: { seconds: Math.floor((NOW - age) / 1000), nanos: 0 } }));
  return { options: { namespace: 'default' }, workflowService: { describeTaskQueue: () => Promise.resolve({ pollers }) } } as unknown as Client;
}

describe('whether a worker polls a task queue', () => {
  test('a poll in the last half minute is a live worker', async () => {
    expect(await readWorkerPresence(clientWithPollers(90_000, 4_000), 'q', NOW)).toEqual({ kind: 'live' });
  });

  test('a worker the server still lists but that stopped polling over a minute ago is none (not five minutes later)', async () => {
    expect(await readWorkerPresence(clientWithPollers(90_000), 'q', NOW)).toEqual({ kind: 'none', sinceMs: 90_000 });
  });

  test('between the two, a long poll may still wait: quiet', async () => {
    expect(await readWorkerPresence(clientWithPollers(45_000), 'q', NOW)).toEqual({ kind: 'quiet', sinceMs: 45_000 });
    expect(await readWorkerPresence(clientWithPollers(), 'q', NOW)).toEqual({ kind: 'none' });
  });
});
