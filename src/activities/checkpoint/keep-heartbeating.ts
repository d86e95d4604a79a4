import { heartbeat } from '@temporalio/activity';

/** How often a checkpoint or restore heartbeats; the SDK sends at most one per 0.8 × heartbeatTimeout. @unit milliseconds */
const EVERY_MS = 1_000;

/**
 * Runs `fn` while heartbeating `details()` (the attempt's latest progress, so a retry still finds its session): an
 * attempt's setup (a restore, a worktree, a lent folder's key) and its first-start and end checkpoints of a large
 * workspace on a loaded host may outlast the stage's heartbeat timeout, and must not be taken for a dead worker.
 */
export async function keepHeartbeating<T>(details: () => unknown, fn: () => Promise<T>): Promise<T> {
  const timer = setInterval(() => heartbeat(details()), EVERY_MS);
  timer.unref();
  try {
    return await fn();
  } finally {
    clearInterval(timer);
  }
}
