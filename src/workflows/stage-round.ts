import type { StageAttemptInput } from '../contracts/stage-attempt.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { ArtifactRef } from '../pipeline/stage-result.js';
import type { StageRunnerContext } from './stage-runner-context.js';

/** How the agent of the next attempt goes on: an answer, granted tools or a retry's feedback, in its session. */
export type Continuation = StageAttemptInput['continuation'];

/** How one round of a stage ended. */
export type StageOutcome =
  | { kind: 'completed' | 'skipped' | 'cancelled' }
  | { kind: 'rework'; stages: string[] }
  /** The stage failed for good; the run fails unless the stage has `continueOnFailure`. */
  | { kind: 'failed'; type: string; message: string }
  /** The run must end whatever the stage's settings (the budget is spent). */
  | { kind: 'stop'; type: string; message: string };

/** After an attempt: run the stage again (with a continuation), or the round is over. */
export type Done = { kind: 'done'; outcome: StageOutcome };

/** What one round of a stage carries across its activity calls (an answer, granted tools or a retry is another call). */
export interface Round {
  number: number;
  /** Tools a person allowed after they were denied. */
  granted: string[];
  /** Every file the round's calls wrote; each call reports only its own. */
  artifacts: ArtifactRef[];
  /** Questions that timed out with `onTimeout: continue` so far. */
  unanswered?: number;
  /** Retries a person asked for after failures so far. */
  retries?: number;
}

/** How the run ended, for `finally` stages: what their attempts are sent (`{{run.status}}`, `{{run.error}}`, `{{run.delivery.…}}`). */
export type RunEnd = NonNullable<StageAttemptInput['runEnd']>;

export type Step = { kind: 'again'; continuation: Continuation } | Done;

/** The stage failed for good: marked so in the tracker, and the round is over. */
export function failed(ctx: StageRunnerContext, stage: ResolvedStage, error: { type: string; message: string }): Done {
  ctx.tracker.markFailed(stage.id, { type: error.type, message: error.message });
  return { kind: 'done', outcome: { kind: 'failed', type: error.type, message: error.message } };
}

/** A person rejected the stage (or a wait ended another way that fails it). */
export function rejected(ctx: StageRunnerContext, stage: ResolvedStage, decision: { kind: string; reason?: string }): Done {
  const reason = decision.reason ?? decision.kind;
  return failed(ctx, stage, { type: 'REJECTED', message: `[REJECTED] a person rejected stage ${stage.id}: ${reason}` });
}
