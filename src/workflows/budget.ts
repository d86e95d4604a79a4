import type { RunTracker } from './run-tracker.js';
import { commandsFor, type HumanWaits } from './waits.js';

/** Why the budget stopped the run. */
export interface BudgetStop {
  type: 'BUDGET_EXCEEDED';
  message: string;
}

/**
 * The pipeline budget (`budgetUsd`). Cost is added after every activity call (see RunTracker.recordCost); the
 * budget is checked before every attempt, so no stage starts once it is spent. Running stages were capped at
 * what was left when they started (`budgetRemainingUsd`).
 */
export class BudgetGuard {
  constructor(
    private readonly tracker: RunTracker,
    private readonly waits: HumanWaits,
    private readonly onExceeded: 'ask' | 'fail',
  ) {}

  /** What is left to spend, or undefined without a budget. @unit US dollars */
  remainingUsd(): number | undefined {
    const { budgetUsd, costUsd } = this.tracker.state;
    return budgetUsd === undefined ? undefined : Math.max(0, budgetUsd - costUsd);
  }

  exhausted(): boolean {
    const remaining = this.remainingUsd();
    return remaining !== undefined && remaining <= 0;
  }

  /** Raises the budget to `budgetUsd` (an `approve --budget-usd` decision). */
  raise(budgetUsd: number): void {
    this.tracker.state.budgetUsd = budgetUsd;
  }

  /**
   * Resolves when `stage` may start an attempt. With the budget spent it waits for a person (`ask`) or stops
   * the run at once (`fail`); a rejection also stops the run.
   * @returns undefined to go on, or why the run must stop.
   */
  async gate(stage: string): Promise<BudgetStop | undefined> {
    while (this.exhausted()) {
      if (this.onExceeded === 'fail') return this.stop();
      const { costUsd, budgetUsd, runId } = this.tracker.state;
      const suggestion = Math.ceil(Math.max(costUsd * 2, (budgetUsd ?? 0) * 2)) || 1;
      const decision = await this.waits.waitFor(stage, {
        kind: 'budget',
        message: `the budget is spent ($${costUsd.toFixed(4)} of $${(budgetUsd ?? 0).toFixed(2)}); stage ${stage} cannot start until it is raised`,
        commands: commandsFor('budget', runId, stage, { budgetUsd: suggestion }),
      });
      if (decision.kind === 'reject') return this.stop(decision.reason);
    }
    return undefined;
  }

  /** The spend per stage, for the BUDGET_EXCEEDED message. */
  private stop(reason?: string): BudgetStop {
    const { costUsd, budgetUsd } = this.tracker.state;
    const spent = this.tracker.state.stages
      .filter((s) => s.totals && s.totals.costUsd > 0)
      .map((s) => `${s.id} $${s.totals!.costUsd.toFixed(4)}`)
      .join(', ');
    return {
      type: 'BUDGET_EXCEEDED',
      message:
        `[BUDGET_EXCEEDED] the pipeline budget of $${(budgetUsd ?? 0).toFixed(2)} is spent ($${costUsd.toFixed(4)}: ${spent || 'nothing recorded'})` +
        `${reason ? `; rejected: ${reason}` : ''}. Work so far is kept in the workspace; raise budgetUsd to run further.`,
    };
  }
}
