import Anthropic from '@anthropic-ai/sdk';
import type { ApplicationFailure } from '@temporalio/common';
import { failureTypeForStatus, stageFailure } from '../../failures.js';

/** Maps the SDK's errors to the catalogue; `retry-after` becomes Temporal's next retry delay. */
export function classifyApiError(stageId: string, model: string, err: unknown): ApplicationFailure {
  if (!(err instanceof Anthropic.APIError)) {
    return stageFailure({
      type: 'INTERNAL_ERROR',
      stageId,
      message: `the Messages API call failed unexpectedly: ${err instanceof Error ? err.message : String(err)}`,
      cause: err instanceof Error ? err : undefined,
    });
  }
  const status = err instanceof Anthropic.APIConnectionError ? undefined : err.status;
  const type = failureTypeForStatus(status, err.type);
  const retryAfterMs = readRetryAfterMs(err.headers);
  const what = status ? `answered ${status}${err.type ? ` ${err.type}` : ''}` : err instanceof Anthropic.APIConnectionError ? 'could not be reached' : `sent an error mid-stream${err.type ? ` (${err.type})` : ''}`;
  const said = err.apiMessage ?? (err.cause instanceof Error ? err.cause.message : err.message);
  return stageFailure({
    type,
    stageId,
    message: `the Messages API ${what} for model ${model}: ${said}${retryAfterMs !== undefined && type === 'RATE_LIMITED' ? ` (retry after ${Math.round(retryAfterMs / 1000)}s)` : ''}`,
    hint: status === 404 && type === 'INVALID_REQUEST' ? `check the stage's \`model\` (${model}); model tiers map to ids through AGENT_PIPELINE_MODELS` : undefined,
    details: { status, errorType: err.type, requestId: err.requestID, model, retryAfterMs },
    nextRetryDelayMs: type === 'RATE_LIMITED' || type === 'OVERLOADED' ? retryAfterMs : undefined,
    cause: err,
  });
}

/** `retry-after-ms`, else `retry-after` in seconds or as an HTTP date. */
export function readRetryAfterMs(headers: Headers | undefined): number | undefined {
  const ms = Number(headers?.get('retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) return ms;
  const value = headers?.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds > 0 ? seconds * 1000 : undefined;
  const date = Date.parse(value);
  return Number.isFinite(date) && date > Date.now() ? date - Date.now() : undefined;
}
