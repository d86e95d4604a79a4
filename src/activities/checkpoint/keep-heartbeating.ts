import { Context } from '@temporalio/activity';

/** How often a checkpoint or restore heartbeats; the SDK sends at most one per 0.8 × heartbeatTimeout. @unit milliseconds */
const EVERY_MS = 1_000;

/**
 * Longest a stage attempt's setup keeps quiet while it has nothing to report: the worker's
 * `maxHeartbeatThrottleInterval` (worker/create-worker.ts), which a cancellation may wait for anyway.
 * @unit milliseconds
 */
const QUIET_MAX_MS = 5_000;

/** The stage attempts running in this process, by activity: when each started (see {@link keepHeartbeating}). */
const attemptStarts = new WeakMap<Context, number>();

/** Marks the running activity as a stage attempt starting now, before its first {@link keepHeartbeating}. */
export function markAttemptStart(): void {
  attemptStarts.set(Context.current(), Date.now());
}

/**
 * Runs `fn` while heartbeating `details()` (the attempt's latest progress, so a retry still finds its session): an
 * attempt's setup (a restore, a worktree, a lent folder's key) and its first-start and end checkpoints of a large
 * workspace on a loaded host may outlast the stage's heartbeat timeout, and must not be taken for a dead worker.
 *
 * In a stage attempt with nothing to report yet (a first attempt before its agent started), it beats only after
 * {@link QUIET_MAX_MS} (or half the heartbeat timeout, when shorter): the SDK sends the first heartbeat at once and
 * holds each later one up to its throttle interval, so an empty first beat held back the agent's first progress, which
 * names its session. A worker lost meanwhile left nothing to go on from: the stage moved with no session and no
 * attempt counted, and its agent started over (a third parallel stage whose first-start checkpoint waited behind two
 * others: 5 runs in 50).
 */
export async function keepHeartbeating<T>(details: () => unknown, fn: () => Promise<T>): Promise<T> {
  const context = Context.current();
  const start = attemptStarts.get(context);
  const quietUntil = start === undefined ? 0 : start + Math.min(QUIET_MAX_MS, (context.info.heartbeatTimeoutMs ?? 0) / 2);
  const timer = setInterval(() => {
    const latest = details();
    if (latest !== undefined || Date.now() >= quietUntil) context.heartbeat(latest);
  }, EVERY_MS);
  timer.unref();
  try {
    return await fn();
  } finally {
    clearInterval(timer);
  }
}
