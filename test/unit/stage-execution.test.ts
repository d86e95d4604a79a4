import { ActivityFailure, ApplicationFailure, RetryState, TimeoutFailure } from '@temporalio/common';
import type { Info } from '@temporalio/activity';
import { describe, expect, test } from 'vitest';
import { executionInfo } from '../../src/activities/owner/stage-execution.js';
import type { StageExecution } from '../../src/contracts/run-owner.js';
import type { NotStarted } from '../../src/workflows/run-owner.js';
import { carryExecution } from '../../src/workflows/stage-execution.js';

/*
 * What a stage execution carries when its run moves to another worker: read by the workflow from the failure of the
 * activity the dead owner's queue never started, and turned back into the attempt's Info on the new owner.
 */

const stage = { id: 'build', retries: 3, timeoutMs: 60_000, heartbeatTimeoutMs: 5_000 };
const execution: StageExecution = { id: 'e1', attemptsBefore: 0, runQueue: 'shared' };

/** The failure of an activity whose retry was not taken from the owner's queue, as Temporal reports it. */
function notStarted(lastHeartbeat: unknown, last?: Error): NotStarted {
  const timeout = new TimeoutFailure('activity ScheduleToStart timeout', lastHeartbeat, 'SCHEDULE_TO_START');
  if (last) Object.assign(timeout, { cause: last });
  return new ActivityFailure('activity timed out', 'runStage', '5', RetryState.NON_RETRYABLE_FAILURE, 'owner', timeout) as NotStarted;
}

describe('a stage execution carried across a move', () => {
  test("takes the attempt, session and cost of the dead owner's last heartbeat, and how that attempt ended", () => {
    const heartbeatTimeout = new TimeoutFailure('activity Heartbeat timeout', undefined, 'HEARTBEAT');
    const carried = carryExecution(execution, notStarted({ attempt: 1, sessionId: 's-1', costUsd: 0.5, usage: { inputTokens: 10, outputTokens: 2 } }, heartbeatTimeout), stage);
    expect(carried).toMatchObject({ id: 'e1', attemptsBefore: 1, sessionId: 's-1', costUsd: 0.5, usage: { inputTokens: 10, outputTokens: 2 } });
    expect(carried.lastFailure?.type).toBe('ACTIVITY_HEARTBEAT');
    expect(carried.lastFailure?.message).toContain('sent no heartbeat');
  });

  test('counts an attempt that ended without a heartbeat, and keeps what an earlier move carried', () => {
    const failed = ApplicationFailure.create({ type: 'OVERLOADED', message: 'the API is overloaded' });
    const carried = carryExecution({ ...execution, attemptsBefore: 2, sessionId: 's-0', costUsd: 1 }, notStarted(undefined, failed), stage);
    expect(carried).toMatchObject({ attemptsBefore: 3, sessionId: 's-0', costUsd: 1, lastFailure: { type: 'OVERLOADED', message: 'the API is overloaded' } });
  });

  test('an activity that never started on a busy owner counts no attempt', () => {
    expect(carryExecution(execution, notStarted(undefined), stage)).toEqual(execution);
  });

  test("becomes the attempt's Info on the new owner: attempts counted on, the log keyed by execution, the session as a heartbeat", () => {
    const info = { attempt: 1, activityId: '7', taskQueue: 'shared@owner-x', heartbeatDetails: undefined } as unknown as Info;
    const seen = executionInfo(info, { ...execution, attemptsBefore: 1, sessionId: 's-1', costUsd: 0.5 });
    expect(seen).toMatchObject({ attempt: 2, activityId: 'e1', taskQueue: 'shared', heartbeatDetails: { sessionId: 's-1', costUsd: 0.5 } });
    // A retry on the new owner reads its own heartbeat.
    expect(executionInfo({ ...info, attempt: 2, heartbeatDetails: { costUsd: 0.9 } } as Info, { ...execution, attemptsBefore: 1 }).heartbeatDetails).toEqual({ costUsd: 0.9 });
    expect(executionInfo(info, undefined)).toBe(info);
  });
});
