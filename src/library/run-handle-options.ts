import type { RunSnapshot } from './run-reader.js';

/* The options and results of a RunHandle's methods (run-handle.ts), which the library exports. */

/** What `run.status()` returns: the run's state, where it came from, and what Temporal knows of the execution. */
export type RunStatusReport = RunSnapshot;

/** Options of {@link RunHandle.approve}. */
export interface ApproveOptions {
  /** The waiting stage; optional when only one stage waits. */
  stage?: string;
  /** Allow these tools (permission waits), or `'all'` for every tool the stage was denied. */
  allow?: string[] | 'all';
  /** Raise the pipeline budget to this amount (budget waits). @unit US dollars */
  budgetUsd?: number;
  /** Grant this many more review rounds (review-round waits). */
  rounds?: number;
  /** A note kept with the decision. */
  comment?: string;
  /**
   * For an agent waiting mid-turn: the digest of the request decided (`waitingFor.promptDigest` in `status`); refused
   * if the agent waits on another by then. Filled in from the run's current wait when the client signs and it is left out.
   */
  request?: string;
}

/** Options of {@link RunHandle.events}. */
export interface EventsOptions {
  /** Stops the iteration (the run goes on). */
  signal?: AbortSignal;
  /**
   * While an agent works, how often its last heartbeat is read for `stage_progress` events. Changes of the run's
   * state (a stage starts, ends, waits) arrive as they happen, whatever this is. @unit milliseconds @default 2000
   */
  intervalMs?: number;
  /** Yield `stage_progress` events (what the agent is doing while its stage runs). @default true */
  progress?: boolean;
}

/** What `cancel()` found: whether a worker polls the run's task queue, so the run stops now rather than when one does. */
export interface CancelOutcome {
  /** False when no worker has polled lately: the cancel waits in the run's history until one starts. */
  workerPolling: boolean;
  taskQueue: string;
}
