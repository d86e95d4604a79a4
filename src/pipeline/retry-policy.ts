import { toMilliseconds, type Duration } from './duration.js';
import type { FailureType } from '../failure-types.js';

/*
 * A stage's retry policy as the pipeline file writes it (`retry:` on a stage or in `defaults`), and the Temporal retry
 * policy of the stage's activity it becomes. Pure: the workflow maps it, `validate` checks it.
 */

/** `retry:` of a stage or of `defaults` (see `retrySchema` in stage-options-schema.ts): Temporal's retry policy of the stage's activity. */
export interface RetrySettings {
  /** The wait before the first retry: a duration as the file writes it. @default 1s */
  initialInterval?: Duration;
  /** Each wait is the previous one times this. @default 2 */
  backoffCoefficient?: number;
  /** The longest wait between two attempts. @default 1m */
  maximumInterval?: Duration;
  /** Failure types never retried, on top of those the catalogue never retries. */
  nonRetryable?: FailureType[];
}

/** The built-in retry policy: what every stage had before `retry:` existed. */
export const DEFAULT_RETRY = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' } as const;

/** A stage's retry settings with the defaults' filled in field by field; undefined when neither sets any. */
export function mergeRetry(defaults: RetrySettings | undefined, stage: RetrySettings | undefined): RetrySettings | undefined {
  if (!defaults && !stage) return undefined;
  return { ...defaults, ...stage };
}

/** Temporal's retry policy for a stage with `retries` retries and these settings (durations in milliseconds). */
export function temporalRetryPolicy(retries: number, settings: RetrySettings | undefined): {
  maximumAttempts: number;
  initialInterval: number;
  backoffCoefficient: number;
  maximumInterval: number;
  nonRetryableErrorTypes?: string[];
} {
  const initialInterval = toMilliseconds(settings?.initialInterval ?? DEFAULT_RETRY.initialInterval);
  // Temporal refuses a maximum below the initial interval; a file that sets only one of them still works.
  const maximumInterval = Math.max(initialInterval, toMilliseconds(settings?.maximumInterval ?? DEFAULT_RETRY.maximumInterval));
  return {
    maximumAttempts: retries + 1,
    initialInterval,
    backoffCoefficient: settings?.backoffCoefficient ?? DEFAULT_RETRY.backoffCoefficient,
    maximumInterval,
    ...(settings?.nonRetryable?.length ? { nonRetryableErrorTypes: [...new Set(settings.nonRetryable)] } : {}),
  };
}
