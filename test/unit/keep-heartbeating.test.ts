import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { keepHeartbeating, markAttemptStart } from '../../src/activities/checkpoint/keep-heartbeating.js';

/*
 * The heartbeats of an attempt's setup (restore, first-start checkpoint). The SDK sends an activity's first heartbeat
 * at once and holds each later one up to its throttle interval (5 s on our workers): an empty first one held back the
 * agent's first progress (its session) that long, and a worker lost meanwhile left the run no session to go on from.
 */

afterEach(() => {
  vi.useRealTimers();
});

/** Heartbeats sent while `work` (under keepHeartbeating with `details`) runs for `ms`, in an activity timing out at 60 s. */
async function beatsWithin(ms: number, details: unknown, attempt = true): Promise<unknown[]> {
  vi.useFakeTimers();
  const env = new MockActivityEnvironment({ heartbeatTimeoutMs: 60_000 });
  const beats: unknown[] = [];
  env.on('heartbeat', (beat: unknown) => beats.push(beat));
  let finish!: () => void;
  const running = env.run(async () => {
    if (attempt) markAttemptStart();
    await keepHeartbeating(() => details, () => new Promise<void>((resolve) => (finish = resolve)));
  });
  await vi.advanceTimersByTimeAsync(ms);
  finish();
  await running;
  return beats;
}

describe('keepHeartbeating', () => {
  test('in a stage attempt with nothing to report yet, beats only after 5 s (a cancellation waits that long anyway)', async () => {
    expect(await beatsWithin(4_500, undefined)).toEqual([]);
    expect((await beatsWithin(6_500, undefined)).length).toBeGreaterThan(0);
  });

  test('beats every second when there is progress to report, or outside a stage attempt', async () => {
    const progress = { sessionId: 'session-1', attempt: 2 };
    expect(await beatsWithin(2_500, progress)).toEqual([progress, progress]);
    expect(await beatsWithin(2_500, undefined, false)).toEqual([undefined, undefined]);
  });
});
