import type { RunBundleSummary } from '../pipeline/run-bundle.js';
import type { RunState } from '../pipeline/run-state.js';
import type { LiveAttempt, RunSnapshot, RunStateSource } from '../library/run-reader.js';
import { listWaits, type StageWait } from './run-view.js';

/*
 * The `--json` documents, in one place so they stay stable (docs/cli.md describes each). Fields are only ever added.
 * Times are milliseconds since the epoch; money is US dollars.
 */

/** `status --json`, `watch --json`, `start --wait --json` and the answer/approve/reject/retry/skip commands. */
export interface RunJson extends RunState {
  /** Every stage waiting for a person, with the commands that move it on. */
  waiting: StageWait[];
  /** The run's page in the Temporal Web UI, when its address is known. */
  webUi: string | null;
  /** Where the state came from: `query` (the workflow), `result` (a completed run), `history` (rebuilt), `update`. */
  source: RunStateSource | 'update';
  /** Temporal's execution status (RUNNING, COMPLETED, FAILED, CANCELLED, TERMINATED, TIMED_OUT), when known. */
  executionStatus: string | null;
  /** False when no worker polls the run's task queue. */
  workerPolling: boolean | null;
  /** Running stage attempts by stage id, from their last heartbeat. */
  live: Record<string, LiveAttempt>;
  /** The files the run carries: `{hash, files, bytes}`; null when workers read them from disk (or unknown). */
  bundle: RunBundleSummary | null;
}

export function runJson(snapshot: RunSnapshot, webUi: string | undefined): RunJson {
  return {
    ...snapshot.state,
    waiting: listWaits(snapshot.state),
    webUi: webUi ?? null,
    source: snapshot.source,
    executionStatus: snapshot.executionStatus,
    workerPolling: snapshot.workerPolling,
    live: Object.fromEntries(snapshot.live),
    bundle: snapshot.bundle ?? null,
  };
}

/** The state an update handler returned, in the same shape. */
export function updatedRunJson(state: RunState, webUi: string | undefined): RunJson {
  return { ...state, waiting: listWaits(state), webUi: webUi ?? null, source: 'update', executionStatus: null, workerPolling: null, live: {}, bundle: null };
}
