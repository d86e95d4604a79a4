import { describe, expect, it } from 'vitest';
import { attemptBudgetCap } from '../../src/activities/attempt/budget-cap.js';

const base = { stageId: 'build', attempt: 2, spentBeforeUsd: 0 };

describe("an attempt's budget cap", () => {
  it('is undefined when neither the stage nor the pipeline caps spending', () => {
    expect(attemptBudgetCap(base)).toBeUndefined();
  });

  it("is the stage's cap or what is left of the pipeline budget, whichever is less, less the earlier attempts' spending", () => {
    expect(attemptBudgetCap({ ...base, stageCapUsd: 2, budgetRemainingUsd: 5, spentBeforeUsd: 0.5 })).toBe(1.5);
    expect(attemptBudgetCap({ ...base, stageCapUsd: 2, budgetRemainingUsd: 1, spentBeforeUsd: 0.25 })).toBe(0.75);
  });

  it('fails BUDGET_EXCEEDED, not retryable, when the pipeline budget is spent before the stage starts', () => {
    expect(() => attemptBudgetCap({ ...base, budgetRemainingUsd: 0 })).toThrow(
      expect.objectContaining({ type: 'BUDGET_EXCEEDED', nonRetryable: true, message: expect.stringContaining("the pipeline's budget is spent ($0.00 left)") }),
    );
  });

  it("fails BUDGET_EXCEEDED when the earlier attempts spent the stage's whole cap", () => {
    expect(() => attemptBudgetCap({ ...base, stageCapUsd: 1, spentBeforeUsd: 1 })).toThrow(
      expect.objectContaining({ type: 'BUDGET_EXCEEDED', message: expect.stringContaining('spent $1.00 of its $1.00 cap before attempt 2 could start') }),
    );
  });
});
