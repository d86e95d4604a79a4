import type { Client } from '@temporalio/client';
import { apiKeyId } from './key-id.js';
import { temporalKeyLimitStore } from './key-limit-store.js';
import { ApiKeyLimiter, type ApiKeyLimits } from './key-limiter.js';
import { LeaseClient } from '../leases/lease-client.js';
import { leaseSlots, slotLeaseKey } from './lease-slots.js';

/** What a worker's limiter of its API key is made from. */
export interface WorkerLimiterOptions {
  /** The worker's `ANTHROPIC_API_KEY`: only its hash leaves this function. */
  apiKey: string;
  limits: ApiKeyLimits;
  /** A client on the worker's connection: the key's limiter workflow runs on its task queue. */
  client: Client;
  taskQueue: string;
  warn: (message: string) => void;
}

/** The limiter of the worker's API key, shared with every worker of the task queue using the same key. */
export function createWorkerLimiter(options: WorkerLimiterOptions): ApiKeyLimiter {
  const keyId = apiKeyId(options.apiKey);
  const { concurrentRequests } = options.limits;
  const leases = new LeaseClient(options.client, options.taskQueue);
  return new ApiKeyLimiter({
    keyId,
    limits: options.limits,
    store: temporalKeyLimitStore(options.client, options.taskQueue, keyId),
    slots: concurrentRequests === undefined ? undefined : leaseSlots(leases, slotLeaseKey(options.taskQueue, keyId), concurrentRequests),
    warn: options.warn,
  });
}
