import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { LeaseClient } from '../leases/lease-client.js';
import type { KeySlots } from './key-limiter.js';

/**
 * How long a slot lives without a renewal: a worker that dies holding one frees it within this time. Its lease is
 * renewed every third of it while the call runs. @unit milliseconds
 */
export const SLOT_TTL_MS = 30_000;

/** How long one acquire waits in the key's lease workflow before it answers with the position. @unit milliseconds */
const SLOT_POLL_MS = 5_000;

/** The lease key of an API key's `concurrentRequests` slots: the key's hash, on the task queue its workers share. */
export function slotLeaseKey(taskQueue: string, keyId: string): string {
  return `api-key:${taskQueue}:${keyId}`;
}

/**
 * `concurrentRequests` as leases on the key (src/activities/leases/): every worker of the queue on the same key takes
 * its slots from the one lease workflow of the key, first come first served. Each call holds its own lease.
 */
export function leaseSlots(leases: LeaseClient, key: string, limit: number): KeySlots {
  const self = `${hostname()}/${process.pid}`;
  return {
    async acquire(signal, options) {
      const request = { key, limit, holder: `${self}/${randomUUID()}`, ttlMs: SLOT_TTL_MS, label: options?.label };
      const lease = await leases.acquire(request, { signal, pollMs: SLOT_POLL_MS, onWait: (wait) => options?.onQueued?.(wait.ahead) });
      const stop = lease.keepAlive();
      return async () => {
        stop();
        await lease.release().catch(() => undefined);
      };
    },
  };
}
