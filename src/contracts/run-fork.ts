import type { StageState } from '../pipeline/run-state.js';

/*
 * A fork of a run (docs/forking.md): a new run that takes over, as completed, the stages of a source run that had
 * completed before a stage first started, starts from the source's workspace as it was then, and runs the rest. The
 * client names the source and the stage in the new run's input (covered by its signature); the worker reads everything
 * else from the source run itself, never from the input.
 */

/** Refused forks: the person changes the pipeline, the inputs or the stage and forks again; a retry changes nothing. */
export const FORK_REFUSED = 'FORK_REFUSED';

/** What a client asks for in a new run's input: the source run and the stage to fork from. */
export interface RunForkRequest {
  /** The source run's workflow id. */
  runId: string;
  /** The stage to fork from. Absent: a rerun, forked from the first stage the source did not complete. */
  stage?: string;
  /** Take over stages whose definition changed (recorded as the memo `forkForced`); changed inputs are still refused. */
  force?: boolean;
}

/** What the `prepareFork` activity hands the new run: the stages it takes over, and where it forked from. */
export interface ForkTakeOver {
  /** The stage forked from (a rerun's, as the worker chose it). */
  from: string;
  /**
   * The Temporal run id of the source's first execution, when the source names its folder by it: which of the runs that
   * bore the source's id the fork took over from (`ForkedFrom.firstExecutionRunId`), for reading its transcripts later.
   */
  sourceFirstExecutionRunId?: string;
  /** The source stages taken over, as the source's state had them (their cost is carried, not spent). */
  stages: StageState[];
  /** The agent sessions of the stages taken over, copied into the new run: a rework of such a stage resumes its own. */
  sessions: [stage: string, sessionId: string][];
  warnings: string[];
}

/** The memo key of a fork's `RunState.forkedFrom`: memo, not a search attribute, so no cluster needs one registered. */
export const FORKED_FROM_MEMO_KEY = 'forkedFrom';
/** Set on a run forked with `--force`. */
export const FORK_FORCED_MEMO_KEY = 'forkForced';
