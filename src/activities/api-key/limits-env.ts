import { MAX_REQUESTS_PER_MINUTE } from '../../contracts/api-key-limit-messages.js';
import type { ApiKeyLimits } from './key-limiter.js';

/** Model calls started per minute on the worker's API key, by every worker using it. */
export const REQUESTS_PER_MINUTE_VARIABLE = 'AGENT_PIPELINE_API_REQUESTS_PER_MINUTE';
/** Model calls (API stages) and agents (CLI stages) at once on the worker's API key, by every worker using it. */
export const CONCURRENT_REQUESTS_VARIABLE = 'AGENT_PIPELINE_API_CONCURRENT_REQUESTS';

/**
 * The worker's limits on its `ANTHROPIC_API_KEY`; unset, none (a 429 still pauses every worker on the key).
 * @throws Error naming the variable, its value and the fix
 */
export function apiKeyLimitsFromEnv(env: NodeJS.ProcessEnv): ApiKeyLimits {
  return {
    requestsPerMinute: wholeNumber(env, REQUESTS_PER_MINUTE_VARIABLE, MAX_REQUESTS_PER_MINUTE),
    concurrentRequests: wholeNumber(env, CONCURRENT_REQUESTS_VARIABLE, 1_000),
  };
}

function wholeNumber(env: NodeJS.ProcessEnv, name: string, max: number): number | undefined {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) {
    throw new Error(`[CONFIG_INVALID] ${name}=${env[name]} is not a whole number from 1 to ${max}; set the limit of your API key's plan, or unset it for no limit`);
  }
  return n;
}
