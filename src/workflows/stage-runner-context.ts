import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { BudgetGuard } from './budget.js';
import type { PipelineRunInput } from '../contracts/messages.js';
import type { ReviewLoop } from './review-loop.js';
import type { RunLimits } from './run-limits.js';
import type { RunTracker } from './run-tracker.js';
import type { AgentPrompts } from './agent-prompts.js';
import type { HumanWaits } from './waits.js';
import type { RunOwner } from './run-owner.js';

/** What the stage runner and the merge-conflict wait work with; owned by the PipelineRun. */
export interface StageRunnerContext {
  input: PipelineRunInput;
  tracker: RunTracker;
  waits: HumanWaits;
  /** Mid-turn prompts of the stages' agents; absent in tests that build a runner without them. */
  prompts?: AgentPrompts;
  budget: BudgetGuard;
  reviews: ReviewLoop;
  /** The last agent session of each stage, to continue it. */
  sessions: Map<string, string>;
  /** Every stage of the pipeline, for the warm start hints. */
  stages?: readonly ResolvedStage[];
  publish(): void;
  /** Template values go by reference (see template-values.ts); false for runs recorded before. */
  byReference?: boolean;
  /**
   * The stage knobs of issue 24 apply (`retry:` shapes Temporal's retry policy, `onBlocked: fail` ends the run,
   * `{{run.error.type}}`); false for runs recorded before them (see `STAGE_KNOBS_PATCH`).
   */
  knobs?: boolean;
  /** Renders the stages' `limits:` keys for their attempts. */
  limits?: RunLimits;
  /**
   * The key that signed the run, as its trust verdict says, for the attempts of a run with a stage that asks to go
   * unsandboxed (`SANDBOX_SIGNER_PATCH`); absent in runs without such stages and in runs recorded before.
   */
  signedBy?: () => string | undefined;
  /** The worker that holds the run, whose queue its stages go to; absent in runs recorded before owners (`RUN_OWNER_PATCH`). */
  owner?: RunOwner;
}
