import { ActivityFailure, RetryState, TimeoutFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { toMilliseconds } from '../../src/pipeline/duration.js';
import { readStageFailure } from '../../src/workflows/stage-activity.js';

/* Messages that carry the fact a person needs to act: which limit ran out and how long it was, the format expected. */

const activityFailure = (cause: Error): ActivityFailure =>
  new ActivityFailure('Activity task timed out', 'runStage', '1', RetryState.TIMEOUT, undefined, cause);

describe('a stage that timed out', () => {
  const stage = { id: 'build', retries: 0, timeoutMs: 30 * 60_000, heartbeatTimeoutMs: 120_000 };

  it('says its timeout ran out, how long that was, and which field raises it', () => {
    const failure = readStageFailure(activityFailure(new TimeoutFailure('activity StartToClose timeout', undefined, 'START_TO_CLOSE')), stage);
    expect(failure.type).toBe('ACTIVITY_START_TO_CLOSE');
    expect(failure.message).toBe("stage build timed out: an attempt ran longer than its `timeout` of 30m00s and was stopped; raise the stage's `timeout` if it needs longer");
  });

  it('says a missed heartbeat came after its heartbeatTimeout, with the length', () => {
    const failure = readStageFailure(activityFailure(new TimeoutFailure('activity Heartbeat timeout', undefined, 'HEARTBEAT')), stage);
    expect(failure.type).toBe('ACTIVITY_HEARTBEAT');
    expect(failure.message).toContain('no heartbeat for its `heartbeatTimeout` of 2m00s');
  });
});

describe('a duration that cannot be read', () => {
  it('shows the format expected', () => {
    expect(() => toMilliseconds('1 minute' as never)).toThrow('invalid duration "1 minute": write a number and a unit (ms, s, m, h or d), such as "90s", "30m" or "2h"');
  });
});
