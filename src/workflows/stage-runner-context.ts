import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { BudgetGuard } from './budget.js';
import type { PipelineRunInput } from './messages.js';
import type { ReviewLoop } from './review-loop.js';
import type { RunLimits } from './run-limits.js';
import type { RunTracker } from './run-tracker.js';
import type { HumanWaits } from './waits.js';

/** What the stage runner and the merge-conflict wait work with; owned by the PipelineRun. */
export interface StageRunnerContext {
  input: PipelineRunInput;
  tracker: RunTracker;
  waits: HumanWaits;
  budget: BudgetGuard;
  reviews: ReviewLoop;
  /** The last agent session of each stage, to continue it. */
  sessions: Map<string, string>;
  /** Every stage of the pipeline, for the warm start hints. */
  stages?: readonly ResolvedStage[];
  publish(): void;
  /** Template values go by reference (see template-values.ts); false for runs recorded before. */
  byReference?: boolean;
  /** Renders the stages' `limits:` keys for their attempts. */
  limits?: RunLimits;
}
