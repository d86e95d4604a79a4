import type { ApplicationFailure } from '@temporalio/common';
import { withFirstDetail } from '../failures.js';

/*
 * Warnings of every attempt of a stage execution reach its final result. Temporal retries an activity without the
 * workflow seeing the attempts, so a warning of attempt 1 (its answer was cut off at max_tokens) would vanish when
 * attempt 2 completes. Like the spending in attempt-spending.ts, each attempt carries the earlier ones' warnings
 * on: in its heartbeats, its result and its failure details (which the stage folder's failures.json records).
 */

/** Warnings in any of `records` (heartbeat details, recorded failures, failure details), first seen first, each once. */
export function warningsBefore(...records: unknown[]): string[] {
  const found: string[] = [];
  for (const record of records) {
    if (record === null || typeof record !== 'object') continue;
    const { warnings } = record as { warnings?: unknown };
    if (!Array.isArray(warnings)) continue;
    for (const warning of warnings) if (typeof warning === 'string') found.push(warning);
  }
  return mergeWarnings(found);
}

/** `lists` joined in order, without repeating a warning an earlier attempt gave too. */
export function mergeWarnings(...lists: (readonly string[] | undefined)[]): string[] {
  return [...new Set(lists.flatMap((list) => list ?? []))];
}

/** `failure` with the earlier attempts' warnings added before its own in its details, for the next attempt to carry on. */
export function withEarlierWarnings(failure: ApplicationFailure, earlier: readonly string[]): ApplicationFailure {
  if (earlier.length === 0) return failure;
  return withFirstDetail(failure, (own) => ({ ...own, warnings: mergeWarnings(earlier, own.warnings as string[] | undefined) }));
}
