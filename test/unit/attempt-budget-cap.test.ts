import { describe, expect, it } from 'vitest';
import { attemptBudgetCap } from '../../src/activities/attempt/budget-cap.js';
import { prewarmTargets } from '../../src/activities/prompt/prewarm-targets.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';

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

describe('an agent started ahead of its stage (warm start) under a budget', () => {
  const pipeline = parsePipeline('name: p\nstages:\n  - { id: open, prompt: x }\n  - { id: capped, prompt: x, maxBudgetUsd: 0.5 }\n', 'p.yaml');
  const ready = pipeline.stages.map((stage) => resolveStage(pipeline, stage));
  const targets = (budgetRemainingUsd?: number) => prewarmTargets(ready, { baseDir: process.cwd(), budgetRemainingUsd, resolveAddDirs: () => undefined });

  it('is started with the cap its attempt will have: none, or the stage\'s own', async () => {
    expect((await targets()).map((t) => [t.stage.id, t.maxBudgetUsd])).toEqual([['open', undefined], ['capped', 0.5]]);
  });

  it('is not started when its cap is what is left of the pipeline budget, which the running stages are still spending', async () => {
    // Started with $3 left, its command line could never match the attempt's: that one starts with $3 less this stage's cost.
    expect((await targets(3)).map((t) => [t.stage.id, t.maxBudgetUsd])).toEqual([['capped', 0.5]]);
    expect(await targets(0.4)).toEqual([]);
  });
});
