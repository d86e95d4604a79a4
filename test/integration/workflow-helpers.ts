import type { WorkflowHandle } from '@temporalio/client';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'vitest';
import type { RunState, StageState } from '../../src/pipeline/run-state.js';
import { getStatusQuery } from '../../src/contracts/messages.js';
import { grpcErrorOf } from '../../src/grpc-errors.js';

/**
 * Polls the status query until `predicate` holds; fails with the last state seen after `timeoutMs`. Between queries it
 * waits a quarter second, or as long as the query took when that was longer: on a loaded machine back-to-back queries
 * would slow the run being waited for. `signal` stops a wait that lost a race: test files share their process, and a
 * query still polling when its file closes the connection fails in the next file.
 */
export async function waitForState(handle: WorkflowHandle, predicate: (state: RunState) => boolean, timeoutMs = 90_000, signal?: AbortSignal): Promise<RunState> {
  const deadline = Date.now() + timeoutMs;
  let state: RunState | undefined;
  while (Date.now() < deadline) {
    signal?.throwIfAborted();
    const queriedAt = Date.now();
    try {
      state = await handle.query(getStatusQuery);
      if (predicate(state)) return state;
    } catch (err) {
      // The first workflow task may not have run yet, or no worker polls just now (one killed, the next starting);
      // anything else is a real problem. The server says which in the gRPC error under the client's own ("Failed to
      // query Workflow"): FAILED_PRECONDITION "no poller seen for task queue recently".
      const reason = `${String(err)} ${grpcErrorOf(err)?.details ?? ''}`;
      if (!reason.includes('no poller') && !reason.includes('not found')) throw err;
    }
    await sleep(Math.min(Math.max(250, Date.now() - queriedAt), 2_000));
  }
  throw new Error(`the run did not reach the expected state within ${timeoutMs} ms; last state:\n${JSON.stringify(summarize(state), null, 2)}`);
}

/** Waits until `stage` waits for a person (of the given kind). */
export function waitForWaiting(handle: WorkflowHandle, stage: string, kind?: string, timeoutMs?: number): Promise<RunState> {
  return waitForState(handle, (s) => {
    const waiting = s.stages.find((x) => x.id === stage)?.waitingFor;
    return waiting !== undefined && (kind === undefined || waiting.kind === kind);
  }, timeoutMs);
}

export function stageOf(state: RunState, id: string): StageState {
  const stage = state.stages.find((s) => s.id === id);
  if (!stage) throw new Error(`no stage ${id} in ${state.stages.map((s) => s.id).join(', ')}`);
  return stage;
}

/** The promise of the product: a finished run never leaves a stage running or waiting. */
export function expectNoStageLeftRunning(state: RunState): void {
  expect(['completed', 'failed', 'timed_out', 'cancelled']).toContain(state.status);
  expect(state.stages.filter((s) => s.status === 'running' || s.status === 'waiting' || s.status === 'pending').map((s) => `${s.id}: ${s.status}`)).toEqual([]);
}

/** A compact view of a state for failure messages. */
export function summarize(state: RunState | undefined): unknown {
  if (!state) return undefined;
  return {
    status: state.status,
    error: state.error,
    stages: state.stages.map((s) => ({ id: s.id, status: s.status, round: s.round, attempt: s.attempt, error: s.error, waiting: s.waitingFor?.kind, skip: s.skip?.reason })),
  };
}
