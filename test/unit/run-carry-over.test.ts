import { describe, expect, test } from 'vitest';
import { parsePipeline } from '../../src/pipeline/parse.js';
import type { StageResult } from '../../src/pipeline/stage-result.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';
import { ReviewLoop } from '../../src/workflows/review-loop.js';
import { handOverLimits, readCarryOver } from '../../src/workflows/run-carry-over.js';
import { RunTracker } from '../../src/workflows/run-tracker.js';
import { HumanWaits } from '../../src/workflows/waits.js';

const pipeline = parsePipeline(
  ['name: p', 'stages:', '  - { id: work, prompt: x }', '  - { id: review, prompt: x, needs: [work], review: { of: work, maxRounds: 5 } }'].join('\n'),
  'p.yaml',
);
const stages = pipeline.stages.map((s) => resolveStage(pipeline, s));
const result = (summary: string, extra: Partial<StageResult> = {}): StageResult => ({
  status: 'completed', summary, outputs: {}, artifacts: [{ path: 'draft.md', bytes: 3, sha256: 'abc' }], usage: { inputTokens: 10, outputTokens: 5 },
  costUsd: 0.25, numTurns: 1, durationMs: 1000, warnings: [], workspace: '/ws/run-1', attempt: 1, ...extra,
});

describe('the state a run carries when it continues as new', () => {
  test('the review loops hand over what they remember, and a restored loop goes on from it', async () => {
    const tracker = new RunTracker('run-1', 'p', {}, stages);
    const sessions = new Map([['work', 'session-work'], ['review', 'session-review']]);
    const loop = new ReviewLoop(stages, tracker, new HumanWaits(tracker, () => {}), (id) => sessions.get(id));
    tracker.markCompleted('work', result('drafted'));
    const outcome = await loop.judge(stages[1], result('not yet', { verdict: 'rework', feedback: ['F1: the title is wrong'] }), 1);
    expect(outcome).toEqual({ kind: 'rework', stages: ['work', 'review'] });

    // Through JSON, as Temporal carries it to the next execution.
    const carried = JSON.parse(JSON.stringify(loop.snapshot())) as ReturnType<ReviewLoop['snapshot']>;
    const restored = new ReviewLoop(stages, tracker, new HumanWaits(tracker, () => {}), (id) => sessions.get(id), carried);
    expect(restored.snapshot()).toEqual(loop.snapshot());
    expect(restored.reworkHistory('work')).toEqual([{ round: 1, reviewer: 'review', summary: 'not yet', feedback: ['F1: the title is wrong'] }]);
    const continuation = restored.takeContinuation(stages[0], 2);
    expect(continuation).toMatchObject({ kind: 'rework', sessionId: 'session-work' });
    expect(continuation?.message).toContain('F1: the title is wrong');
    // Taken once: the planned brief is not handed over a second time.
    expect(restored.snapshot().continuations).toEqual([]);
  });

  test('a carried state of a version this worker does not know is refused, naming both versions', () => {
    expect(readCarryOver(undefined)).toBeUndefined();
    expect(() => readCarryOver({ version: 2 })).toThrow('unknown carry-over version 2 (this worker reads 1)');
  });

  test('the hand-over limits default to just under what Temporal warns about', () => {
    expect(handOverLimits(undefined)).toEqual({ afterEvents: 10_000, afterBytes: 10 * 1024 * 1024 });
    expect(handOverLimits({ afterEvents: 300, afterMb: 2 })).toEqual({ afterEvents: 300, afterBytes: 2 * 1024 * 1024 });
  });
});
