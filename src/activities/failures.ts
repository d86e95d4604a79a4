import { ApplicationFailure, type Duration } from '@temporalio/common';

/**
 * The failure catalogue: every way a stage attempt can fail, with a stable `type` and whether
 * Temporal should retry it. Activities throw only failures made by `stageFailure`.
 */
export const FAILURES = {
  /** Thrown when the pipeline or stage configuration cannot work (bad flag combination, bad path). */
  CONFIG_INVALID: { nonRetryable: true },
  /** Thrown when an agent definition or step template file does not exist. */
  FILE_NOT_FOUND: { nonRetryable: true },
  /** Thrown when a step template uses a variable the run does not define. */
  TEMPLATE_VARIABLE_UNKNOWN: { nonRetryable: true },
  /** Thrown when the `claude` binary cannot be found or started. */
  CLI_NOT_INSTALLED: { nonRetryable: true },
  /** Thrown when no API key is configured for the backend. */
  API_KEY_MISSING: { nonRetryable: true },
  /** Thrown when the API rejects the key (401) or the account lacks permission (403). */
  API_KEY_REJECTED: { nonRetryable: true },
  /** Thrown when the API refuses the request as malformed (400), or the model does not exist (404). */
  INVALID_REQUEST: { nonRetryable: true },
  /** Thrown when the stage's or pipeline's budget is spent. */
  BUDGET_EXCEEDED: { nonRetryable: true },
  /** Thrown when the agent's answer lacks a valid report block after the allowed attempts. */
  OUTPUT_CONTRACT_VIOLATION: { nonRetryable: false },
  /** Thrown when the agent reported `success: false`. */
  AGENT_REPORTED_FAILURE: { nonRetryable: true },
  /** Thrown when the API answered 429; honours `retry-after`. */
  RATE_LIMITED: { nonRetryable: false },
  /** Thrown when the API answered 529. */
  OVERLOADED: { nonRetryable: false },
  /** Thrown when the API answered 5xx. */
  SERVER_ERROR: { nonRetryable: false },
  /** Thrown when the API could not be reached or the connection broke. */
  CONNECTION_ERROR: { nonRetryable: false },
  /** Thrown when the agent produced no output for the stall timeout and was stopped. */
  AGENT_STALLED: { nonRetryable: false },
  /** Thrown when the CLI exited without a final result (crash, signal, unexpected exit code). */
  CLI_CRASHED: { nonRetryable: false },
  /** Thrown when the API's answer was empty. */
  RESPONSE_EMPTY: { nonRetryable: false },
} as const;

export type FailureType = keyof typeof FAILURES;

export interface StageFailureOptions {
  type: FailureType;
  /** What failed and what to do about it; the stage id is prefixed. */
  message: string;
  stageId: string;
  /** Small, secret-free facts for the Web UI and `status` (never the API key, never whole outputs). */
  details?: Record<string, unknown>;
  cause?: Error;
  /** Overrides the retry policy's next delay, e.g. from `retry-after`. @unit milliseconds */
  nextRetryDelayMs?: number;
  /** Forces non-retryable, e.g. once a retryable contract violation has used up its attempts. */
  nonRetryable?: boolean;
}

/** Builds the catalogue's `ApplicationFailure` for a stage attempt. */
export function stageFailure(options: StageFailureOptions): ApplicationFailure {
  const nextRetryDelay: Duration | undefined = options.nextRetryDelayMs;
  return ApplicationFailure.create({
    type: options.type,
    message: `[${options.type}] stage ${options.stageId}: ${options.message}`,
    nonRetryable: options.nonRetryable ?? FAILURES[options.type].nonRetryable,
    details: options.details ? [options.details] : undefined,
    cause: options.cause,
    nextRetryDelay,
  });
}

/** True for failures our catalogue made, whatever realm they were created in. */
export function isStageFailure(err: unknown): err is ApplicationFailure & { type: FailureType } {
  return err instanceof ApplicationFailure && typeof err.type === 'string' && err.type in FAILURES;
}

/** Maps an HTTP status from the Messages API to the catalogue (the one place that decides). */
export function failureTypeForStatus(status: number | undefined): FailureType {
  if (status === undefined) return 'CONNECTION_ERROR';
  if (status === 401 || status === 403) return 'API_KEY_REJECTED';
  if (status === 400 || status === 404 || status === 413 || status === 422) return 'INVALID_REQUEST';
  if (status === 429) return 'RATE_LIMITED';
  if (status === 529) return 'OVERLOADED';
  if (status >= 500 || status === 408 || status === 409) return 'SERVER_ERROR';
  return 'INVALID_REQUEST';
}
