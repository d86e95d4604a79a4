import { ApplicationFailure, type Duration } from '@temporalio/common';
import { redactSecrets } from './secrets.js';
import { FAILURES, type FailureType } from '../failure-types.js';

export interface StageFailureOptions {
  type: FailureType;
  /** What failed, with the bad value; the stage id is prefixed. */
  message: string;
  stageId: string;
  /** What to do about it. @default the catalogue's hint for `type` */
  hint?: string;
  /** Small facts for the Web UI and `status` (never whole outputs). Known secrets are redacted. */
  details?: Record<string, unknown>;
  cause?: Error;
  /** Overrides the retry policy's next delay, e.g. from `retry-after`. @unit milliseconds */
  nextRetryDelayMs?: number;
  /** Forces retryability, e.g. non-retryable once a contract violation has used up its retries. */
  nonRetryable?: boolean;
}

/** The hint of an empty answer a stage made final (`retry.nonRetryable: [RESPONSE_EMPTY]`), whatever the backend. */
export const FINAL_EMPTY_ANSWER_HINT = 'it is not retried (the stage\'s `retry.nonRetryable` lists RESPONSE_EMPTY); check the prompt and the model, or remove RESPONSE_EMPTY from `retry.nonRetryable` to have an empty answer retried';

/**
 * Builds the catalogue's `ApplicationFailure` for a stage attempt:
 * `[TYPE] stage ID: what failed; what to do`. Known secrets are redacted from the message, the
 * details and the cause chain.
 */
export function stageFailure(options: StageFailureOptions): ApplicationFailure {
  const nextRetryDelay: Duration | undefined = options.nextRetryDelayMs;
  const hint = options.hint ?? FAILURES[options.type].hint;
  return ApplicationFailure.create({
    type: options.type,
    message: redactSecrets(`[${options.type}] stage ${options.stageId}: ${options.message}; ${hint}`),
    nonRetryable: options.nonRetryable ?? FAILURES[options.type].nonRetryable,
    details: options.details ? [redactSecrets(options.details)] : undefined,
    cause: options.cause ? redactError(options.cause) : undefined,
    nextRetryDelay,
  });
}

/**
 * `failure` again, with its first detail replaced by what `update` makes of it (an object; `{}` when there is
 * none): how an attempt carries its earlier attempts' spending and warnings on in its failure. Type, message,
 * retry settings, cause and stack stay.
 */
export function withFirstDetail(failure: ApplicationFailure, update: (own: Record<string, unknown>) => object): ApplicationFailure {
  const [first, ...rest] = failure.details ?? [];
  const own = first !== null && typeof first === 'object' ? (first as Record<string, unknown>) : {};
  const carried = ApplicationFailure.create({
    type: failure.type ?? undefined,
    message: failure.message,
    nonRetryable: failure.nonRetryable ?? undefined,
    nextRetryDelay: failure.nextRetryDelay,
    category: failure.category ?? undefined,
    cause: failure.cause,
    details: [update(own), ...rest],
  });
  carried.stack = failure.stack;
  return carried;
}

/**
 * Maps a Messages API error to the catalogue (the one place that decides): by HTTP status, or, for
 * an error event in the middle of a stream (no status), by the error body's `type`.
 */
export function failureTypeForStatus(status: number | undefined, errorType?: string | null): FailureType {
  if (status === undefined) {
    if (errorType === 'overloaded_error') return 'OVERLOADED';
    if (errorType === 'rate_limit_error') return 'RATE_LIMITED';
    if (errorType === 'api_error') return 'SERVER_ERROR';
    return 'CONNECTION_ERROR';
  }
  if (status === 401 || status === 403) return 'API_KEY_REJECTED';
  if (status === 429) return 'RATE_LIMITED';
  if (status === 529) return 'OVERLOADED';
  if (status >= 500 || status === 408 || status === 409) return 'SERVER_ERROR';
  return 'INVALID_REQUEST';
}

/**
 * The error, or a copy with known secrets removed from its message, stack and causes. Temporal
 * serialises a cause's message and stack only, so a copy of those keeps all that travels.
 */
function redactError(err: Error, depth = 0): Error {
  const cause = err.cause instanceof Error && depth < 5 ? redactError(err.cause, depth + 1) : undefined;
  const message = redactSecrets(err.message);
  const stack = err.stack === undefined ? undefined : redactSecrets(err.stack);
  if (message === err.message && stack === err.stack && cause === err.cause) return err;
  const copy = new Error(message, cause ? { cause } : undefined);
  copy.name = err.name;
  copy.stack = stack;
  return copy;
}
