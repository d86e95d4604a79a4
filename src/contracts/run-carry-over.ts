import type { RunState } from '../pipeline/run-state.js';
import type { ReviewLoopState } from './stage-attempt.js';
import type { RunTrustCarryOver } from './trust-types.js';
import type { RunOwnerClaim } from './run-owner.js';

/**
 * The shape of {@link RunCarryOver}: bump it when a field changes meaning, and teach {@link readCarryOver} the old
 * shape, so that a run handed over by an older worker still continues on a newer one.
 */
export const CARRY_OVER_VERSION = 1;

/**
 * Everything a run hands to its next execution when it continues as new (same workflow id, fresh history). One
 * object, built in one place (`PipelineRun.carryOver()`) and read in one place (the `PipelineRun` constructor), so a
 * new piece of run state is carried by adding a field here: the compiler then points at both ends. Every field is
 * required, even those that may hold `undefined`, so that building the object without one does not compile.
 *
 * Carried at a quiescent point only: no stage round is in flight, so no activity runs and no stage waits for a
 * person (waits finish before the hand-over; see `docs/long-runs.md`). The run's file bundle is not in here: it
 * stays in `PipelineRunInput.bundle` of the next execution's input, where the activities read it.
 */
export interface RunCarryOver {
  version: typeof CARRY_OVER_VERSION;
  /** The whole run as `status` shows it: every stage's state, result and totals, cost, budget, warnings, ledgers. */
  state: RunState;
  /** The review round each reworked stage runs next (absent: round 1). */
  rounds: [stage: string, round: number][];
  /** The last agent session of each stage, so the next round resumes it. */
  sessions: [stage: string, sessionId: string][];
  /** The review loops' memory: rounds granted, rework history, planned continuations, artifacts at review. */
  reviews: ReviewLoopState;
  /** The failure that ends the run, when one happened before the hand-over. */
  failure: { type: string; message: string } | undefined;
  /** How the run ended, once `finally` stages run (never set at a hand-over today; carried for completeness). */
  runEnd: { status: string; error: string; errorType?: string } | undefined;
  /** When the pipeline `timeout` ends the run, counted from the first execution's start. @unit milliseconds since the epoch */
  deadlineAt: number | undefined;
  /** Executions of this run so far, this one included (1 for a run that never continued). */
  executions: number;
  /**
   * Whom the run trusts: the verdict of its first execution's check (which is not made again: a start signature may
   * have expired since) and the nonces of the signed decisions it took. Absent when handed over by a worker older than
   * signed runs, or for a run started before them.
   */
  trust: RunTrustCarryOver | undefined;
  /**
   * The pipeline `limits:` keys the run holds for its life (taken before its first stage, so before any hand-over);
   * the next execution holds them under the same holder id and does not ask again. Absent in older hand-overs.
   */
  leases: string[] | undefined;
  /** The worker that holds the run, so the next execution stays on it. Absent in older hand-overs and unowned runs. */
  owner: RunOwnerClaim | undefined;
}

/**
 * The memo key a continued run's executions carry its first start time under (milliseconds since the epoch), so that
 * `list` shows when the run started, not when its latest execution did.
 */
export const RUN_STARTED_AT_MEMO_KEY = 'agentPipelineStartedAt';
