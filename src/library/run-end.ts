import { ApplicationFailure, CancelledFailure, TerminatedFailure, TimeoutFailure, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { isTimeoutFailure, type RunState, type RunStatus, type StageState } from '../pipeline/run-state.js';

/*
 * How a closed run ended, reconciled with what Temporal says of its execution. The workflow's own state (its status
 * query, replayed by a worker) ends only where the workflow ended it: a run terminated, timed out by Temporal, or
 * failed before the workflow tracked its end (a refused input check) still says `running` or `waiting` there, with
 * its clocks ticking. Every reader (`status`, `watch`, `events`, `result`) reads a run through this, so they all
 * agree with `list`, which asks Temporal.
 */

/** The run status each closed execution status forces, whatever the workflow's state says. */
const FORCED: Record<string, RunStatus> = { TERMINATED: 'terminated', TIMED_OUT: 'timed_out' };
/** Statuses of a run still going: a closed execution cannot have them. */
const OPEN: ReadonlySet<RunStatus> = new Set(['running', 'waiting', 'blocked']);

/** True when the execution is over (not running, not handed over to a new execution). */
export function isClosedExecution(executionStatus: string): boolean {
  return executionStatus !== 'RUNNING' && executionStatus !== 'CONTINUED_AS_NEW';
}

/** Why the execution closed, from its result: the failure's type and message. */
async function readCloseReason(handle: WorkflowHandle): Promise<{ type: string; message: string } | undefined> {
  const err = await handle.result().then(() => undefined, (e: unknown) => e);
  if (!(err instanceof WorkflowFailedError)) return undefined;
  const cause = err.cause;
  if (cause instanceof TerminatedFailure) return { type: 'TERMINATED', message: `the run was terminated${cause.message ? `: ${cause.message}` : ''}` };
  if (cause instanceof TimeoutFailure) return { type: 'TIMED_OUT', message: 'the run reached the execution timeout it was started with' };
  if (cause instanceof CancelledFailure) return { type: 'CANCELLED', message: 'the run was cancelled' };
  if (cause instanceof ApplicationFailure) return { type: cause.type ?? 'ApplicationFailure', message: cause.message };
  return cause ? { type: cause.name, message: cause.message } : undefined;
}

/** The status a closed run ended with: Temporal's where it overrides the workflow, else the workflow's own. */
function endStatus(state: RunState, executionStatus: string, reason: { type: string } | undefined): RunStatus {
  if (FORCED[executionStatus]) return FORCED[executionStatus];
  if (!OPEN.has(state.status)) return state.status;
  if (executionStatus === 'CANCELLED') return 'cancelled';
  if (executionStatus === 'COMPLETED') return 'completed';
  return reason && isTimeoutFailure(reason.type) ? 'timed_out' : 'failed';
}

/** A stage as a closed run leaves it: nothing runs or waits any more, and what never started never will. */
function closeStage(stage: StageState, closedAt: number | undefined): StageState {
  if (stage.status === 'pending') return { ...stage, status: 'skipped' };
  if (stage.status !== 'running' && stage.status !== 'waiting') return stage;
  const { waitingFor: _waitingFor, leaseWait: _leaseWait, ...rest } = stage;
  return { ...rest, status: 'cancelled', finishedAt: stage.finishedAt ?? closedAt };
}

/**
 * The run's state as its closed execution ended it: the status Temporal gives (`terminated`, `timed_out`) or, where
 * the workflow never tracked its end, `failed`/`cancelled` with the execution's failure as the run's error; stages
 * left running or waiting `cancelled`, pending ones `skipped`; the close time as `finishedAt`. A run still going, or
 * one whose workflow tracked its own end, is returned as it is.
 */
export async function reconcileClosedRun(handle: WorkflowHandle, state: RunState, execution: { status: string; closeTime?: number }): Promise<RunState> {
  if (!isClosedExecution(execution.status)) return state;
  const forced = FORCED[execution.status] !== undefined;
  // A state rebuilt from history (no worker answered the query in time) says `failed` but not why: the reason is added.
  const lacksReason = execution.status === 'FAILED' && state.error === undefined;
  if (!forced && !OPEN.has(state.status) && !lacksReason) return state;
  const reason = await readCloseReason(handle);
  const { leaseWait: _leaseWait, ...rest } = state;
  return {
    ...rest,
    status: endStatus(state, execution.status, reason),
    error: forced ? (reason ?? state.error) : (state.error ?? reason),
    stages: state.stages.map((stage) => closeStage(stage, execution.closeTime)),
    finishedAt: state.finishedAt ?? execution.closeTime,
  };
}
