import { stageFailure } from '../failures.js';

/** What decides how much one attempt may spend. */
export interface BudgetCapOptions {
  stageId: string;
  attempt: number;
  /** The stage's own `maxBudgetUsd`. @unit US dollars */
  stageCapUsd?: number;
  /** What is left of the pipeline's budget. @unit US dollars */
  budgetRemainingUsd?: number;
  /** What the execution's earlier attempts spent. @unit US dollars */
  spentBeforeUsd: number;
}

/**
 * The spend cap of one attempt: the stage's cap, never more than what is left of the pipeline budget, less what the
 * execution's earlier attempts spent (Temporal's retries share the cap). Undefined when nothing caps the stage.
 * @throws BUDGET_EXCEEDED when the pipeline's budget or the stage's cap is spent before the attempt starts
 */
export function attemptBudgetCap(options: BudgetCapOptions): number | undefined {
  const { stageId, budgetRemainingUsd, spentBeforeUsd } = options;
  if (budgetRemainingUsd !== undefined && budgetRemainingUsd <= 0) {
    throw stageFailure({ type: 'BUDGET_EXCEEDED', stageId, message: `the pipeline's budget is spent ($${budgetRemainingUsd.toFixed(2)} left) before the stage could start` });
  }
  const executionCap = minDefined(options.stageCapUsd, budgetRemainingUsd);
  if (executionCap === undefined) return undefined;
  const cap = executionCap - spentBeforeUsd;
  if (cap <= 0) {
    throw stageFailure({
      type: 'BUDGET_EXCEEDED',
      stageId,
      message: `the stage's earlier attempts spent $${spentBeforeUsd.toFixed(2)} of its $${executionCap.toFixed(2)} cap before attempt ${options.attempt} could start`,
    });
  }
  return cap;
}

function minDefined(...values: (number | undefined)[]): number | undefined {
  const defined = values.filter((v): v is number => v !== undefined);
  return defined.length ? Math.min(...defined) : undefined;
}
