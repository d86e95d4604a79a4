import { ApplicationFailure, TimeoutFailure, uuid4, workflowInfo } from '@temporalio/workflow';
import type { NotStarted } from './run-owner.js';
import type { StageExecution } from '../contracts/run-owner.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import { readStageFailure, readUsage } from './stage-activity.js';

/** A new execution of a stage (an attempt call of a round), keyed by a workflow-made id that survives a move. */
export function newExecution(): StageExecution {
  return { id: uuid4(), attemptsBefore: 0, runQueue: workflowInfo().taskQueue };
}

/**
 * The execution as the next activity carries it on, after its activity did not start on the owner's queue: Temporal had
 * scheduled a retry there, so the failure holds the last heartbeat of the execution (session, cost, attempt) and, as its
 * cause, how the attempt before ended (a heartbeat timeout when its worker died).
 */
export function carryExecution(execution: StageExecution, err: NotStarted, stage: Pick<ResolvedStage, 'id' | 'retries' | 'timeoutMs' | 'heartbeatTimeoutMs'>): StageExecution {
  const timeout = err.cause;
  const last = timeout.cause;
  const facts = [asRecord(timeout.lastHeartbeatDetails), last instanceof ApplicationFailure ? asRecord(last.details?.[0]) : last instanceof TimeoutFailure ? asRecord(last.lastHeartbeatDetails) : {}];
  // An attempt that ended is counted even when it never beat; the attempts' own numbers count the execution's total.
  const attempts = Math.max(execution.attemptsBefore + (last ? 1 : 0), ...facts.map((f) => (typeof f.attempt === 'number' ? f.attempt : 0)));
  const costs = facts.filter((f) => typeof f.costUsd === 'number') as { costUsd: number; usage?: unknown }[];
  const dearest = costs.sort((a, b) => b.costUsd - a.costUsd)[0];
  const sessionId = facts.map((f) => f.sessionId).find((s): s is string => typeof s === 'string');
  const lastFailure = last ? readStageFailure(last, stage) : undefined;
  return {
    ...execution,
    attemptsBefore: attempts,
    ...(sessionId ? { sessionId } : {}),
    ...(dearest && dearest.costUsd >= (execution.costUsd ?? 0) ? { costUsd: dearest.costUsd, usage: readUsage(dearest.usage) ?? execution.usage } : {}),
    ...(lastFailure ? { lastFailure: { type: lastFailure.type, message: lastFailure.message } } : {}),
  };
}

function asRecord(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {};
}
