import Anthropic from '@anthropic-ai/sdk';
import type { ApiKeyLimiter, OnThrottled } from '../../api-key/key-limiter.js';
import { readRetryAfterMs } from './api-error.js';

/** The worker's limiter of its API key, and where an attempt reports its throttled waits. */
export interface CallLimits {
  limiter: ApiKeyLimiter;
  onThrottled: OnThrottled;
  /** What `agent-pipeline limits` shows for a call holding a slot of `concurrentRequests`. */
  label?: string;
  /** Told of each 429/529 the call waits out instead of failing (for the transcript). */
  onRateLimited?: (status: number, retryAfterMs: number) => void;
}

/**
 * 429/529 answers one call waits out within its attempt, each after sharing the pause with every worker on the key.
 * Past them the error goes to Temporal's retry, with `retry-after` as its delay (api-error.ts).
 */
const MAX_WAITED_OUT = 5;

/**
 * Makes one model call under the key's shared limits: waits (heartbeating, no tokens) for the key's pause, slot and
 * start time, and waits out a 429/529 that says when to retry after telling every worker to pause.
 * @throws what `call` throws otherwise; the abort reason when cancelled while waiting
 */
export async function callWithinLimits<T>(limits: CallLimits | undefined, signal: AbortSignal, call: () => Promise<T>): Promise<T> {
  if (!limits) return call();
  for (let waited = 0; ; waited++) {
    const release = await limits.limiter.acquire(signal, limits.onThrottled, { label: limits.label });
    try {
      return await call();
    } catch (err) {
      const retryAfterMs = sharedPauseOf(err);
      if (retryAfterMs === undefined || signal.aborted) throw err;
      limits.limiter.reportRateLimited(retryAfterMs);
      if (waited >= MAX_WAITED_OUT) throw err;
      limits.onRateLimited?.((err as InstanceType<typeof Anthropic.APIError>).status ?? 0, retryAfterMs);
    } finally {
      await release();
    }
  }
}

/** The pause a 429 (rate limited) or 529 (overloaded) asks of the whole key, when it says how long. */
function sharedPauseOf(err: unknown): number | undefined {
  if (!(err instanceof Anthropic.APIError) || err instanceof Anthropic.APIConnectionError) return undefined;
  if (err.status !== 429 && err.status !== 529) return undefined;
  return readRetryAfterMs(err.headers);
}
