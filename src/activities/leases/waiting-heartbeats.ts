import { heartbeat } from '@temporalio/activity';

/** How often a waiting attempt heartbeats; the SDK sends at most one per throttle interval. @unit milliseconds */
const EVERY_MS = 1_000;

/**
 * Heartbeats `details` on a timer until the returned function is called: while an attempt waits for a key, the key's
 * workflow answers at most every poll interval, and later on a loaded host (an update queues behind other workflow
 * tasks, or no worker polls its queue for a while). An attempt that heartbeated only on those answers was taken for a
 * dead worker and retried, spending its retries without its stage ever running (a 5 s heartbeat timeout, attempts 2
 * and 3 at load 8–16).
 */
export function heartbeatWhileWaiting(details: unknown): () => void {
  const timer = setInterval(() => heartbeat(details), EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
