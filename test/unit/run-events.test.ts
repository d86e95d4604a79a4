import { describe, expect, test } from 'vitest';
import { StageProgressTracker } from '../../src/library/run-events.js';
import type { LiveAttempt } from '../../src/library/run-reader.js';
import type { RunState } from '../../src/pipeline/run-state.js';

const state = {
  runId: 'r1',
  pipeline: 'p',
  status: 'running',
  inputs: {},
  costUsd: 0,
  stages: [{ id: 'build', status: 'running', attempt: 1 }],
} as unknown as RunState;

function live(attempt: Partial<LiveAttempt>): Map<string, LiveAttempt> {
  return new Map([['build', { attempt: 1, ...attempt }]]);
}

describe('stage_progress events', () => {
  test('an attempt that has done nothing yet yields no event', () => {
    const tracker = new StageProgressTracker();
    expect(tracker.next(state, live({ turns: 0, costUsd: 0, lastEventAt: 1_000, agent: { toolCalls: 0 } }))).toEqual([]);
  });

  test('a heartbeat that only moves lastEventAt repeats nothing', () => {
    const tracker = new StageProgressTracker();
    const working = { turns: 1, costUsd: 0.01, agent: { text: 'reading', toolCalls: 0 } };
    expect(tracker.next(state, live({ ...working, lastEventAt: 1_000 }))).toHaveLength(1);
    expect(tracker.next(state, live({ ...working, lastEventAt: 2_000 }))).toEqual([]);
    expect(tracker.next(state, live({ ...working, lastEventAt: 3_000 }))).toEqual([]);
  });

  test('each change of what the agent did is told once', () => {
    const tracker = new StageProgressTracker();
    const first = tracker.next(state, live({ turns: 1, agent: { text: 'a', toolCalls: 0 } }));
    const second = tracker.next(state, live({ turns: 1, agent: { text: 'a', tool: { name: 'Bash', input: 'ls' }, toolCalls: 1 } }));
    expect(first).toHaveLength(1);
    expect(second).toHaveLength(1);
    expect(second[0]).toMatchObject({ type: 'stage_progress', stage: 'build', progress: { agent: { tool: { name: 'Bash' } } } });
  });
});
