import type { Client } from '@temporalio/client';
import { timestampMs } from './run-history.js';

/**
 * A worker whose last poll is this recent is there. An idle worker's long poll waits up to a minute on the server,
 * and the server records a poll when it starts, so a live but idle worker can look up to a minute old.
 * @unit milliseconds
 */
export const POLL_FRESH_MS = 30_000;

/**
 * Past this, no poll of a live worker is still waiting (Temporal ends a long poll after a minute), so nobody polls,
 * whatever the server's list of pollers (kept for five minutes) still shows.
 * @unit milliseconds
 */
export const POLL_STALE_MS = 70_000;

/** Whether a worker polls a task queue: `live`, `quiet` (its last poll may still wait, or it stopped), or `none`. */
export type WorkerPresence = { kind: 'live' } | { kind: 'quiet'; sinceMs: number } | { kind: 'none'; sinceMs?: number };

/** What the workflow pollers of `taskQueue` say, by their last access time rather than their presence in the list. */
export async function readWorkerPresence(client: Client, taskQueue: string, now = Date.now()): Promise<WorkerPresence> {
  const response = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: 1, // TASK_QUEUE_TYPE_WORKFLOW
  });
  const lastPolls = (response.pollers ?? []).map((p) => timestampMs(p.lastAccessTime)).filter((t): t is number => t !== undefined);
  if (lastPolls.length === 0) return { kind: 'none' };
  const sinceMs = Math.max(0, now - Math.max(...lastPolls));
  if (sinceMs <= POLL_FRESH_MS) return { kind: 'live' };
  return sinceMs <= POLL_STALE_MS ? { kind: 'quiet', sinceMs } : { kind: 'none', sinceMs };
}
