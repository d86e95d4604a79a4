import type { ApplicationFailure } from '@temporalio/common';
import { withFirstDetail } from '../failures.js';
import type { TokenUsage } from '../../pipeline/stage-result.js';

/*
 * Temporal retries an activity without the workflow seeing the attempts, so the workflow only learns the cost of
 * the attempt that ended the execution. Each attempt therefore carries on what the earlier ones spent: its
 * heartbeats, its result and its failure details all count every attempt of the execution so far.
 */

/** Cost and tokens of a stage execution's attempts. */
export interface Spending {
  /** @unit US dollars */
  costUsd: number;
  usage: TokenUsage;
}

/**
 * What the earlier attempts spent, from any of their records (the previous attempt's last heartbeat, its recorded
 * failure). Each is a lower bound of the same running total, and a killed attempt may have beaten after its last
 * record or the other way round, so the larger figure wins.
 */
export function spentBefore(...records: unknown[]): Spending {
  let costUsd = 0;
  const usage: Required<TokenUsage> = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
  for (const record of records) {
    if (record === null || typeof record !== 'object') continue;
    const { costUsd: cost, usage: seen } = record as { costUsd?: unknown; usage?: Record<string, unknown> };
    if (typeof cost === 'number' && Number.isFinite(cost)) costUsd = Math.max(costUsd, cost);
    for (const key of TOKEN_KEYS) {
      const value = seen?.[key];
      if (typeof value === 'number') usage[key] = Math.max(usage[key], value);
    }
  }
  return { costUsd, usage };
}

const TOKEN_KEYS = ['inputTokens', 'outputTokens', 'cacheReadTokens', 'cacheWriteTokens'] as const;

function spentNothing(spending: Spending): boolean {
  return spending.costUsd === 0 && TOKEN_KEYS.every((key) => (spending.usage[key] ?? 0) === 0);
}

/**
 * `value` with the earlier attempts' spending added to its own. A cost of `null` (the model's price is unknown)
 * stays unknown; a missing cost or usage becomes the earlier attempts' alone.
 */
export function addSpending<T extends { costUsd?: number | null; usage?: TokenUsage }>(value: T, earlier: Spending): T {
  if (spentNothing(earlier)) return value;
  const costUsd = value.costUsd === null ? null : (value.costUsd ?? 0) + earlier.costUsd;
  const usage = {
    inputTokens: (value.usage?.inputTokens ?? 0) + earlier.usage.inputTokens,
    outputTokens: (value.usage?.outputTokens ?? 0) + earlier.usage.outputTokens,
    cacheReadTokens: (value.usage?.cacheReadTokens ?? 0) + (earlier.usage.cacheReadTokens ?? 0),
    cacheWriteTokens: (value.usage?.cacheWriteTokens ?? 0) + (earlier.usage.cacheWriteTokens ?? 0),
  };
  return { ...value, costUsd, usage };
}

/** `failure` with the earlier attempts' spending added to its details, where the workflow reads a failed stage's cost. */
export function withEarlierSpending(failure: ApplicationFailure, earlier: Spending): ApplicationFailure {
  if (spentNothing(earlier)) return failure;
  return withFirstDetail(failure, (own) => addSpending(own as { costUsd?: number; usage?: TokenUsage }, earlier));
}
