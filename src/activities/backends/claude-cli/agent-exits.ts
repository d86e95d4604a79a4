/*
 * Agents whose stage already completed while the `claude` process was still shutting down (see `settleOnResult` in
 * cli-process.ts). The CLI spends about 20 ms after its result event writing session bookkeeping and tearing down;
 * the stage need not wait for that, but the next agent of the same run on this worker must: it may resume that
 * session, or retry the stage whose lock the exiting agent still holds. One registry per worker process.
 */

const exiting = new Map<string, Set<Promise<void>>>();

/** Records an agent of `runKey` (the run's Claude config folder) that is still exiting; `done` settles once it is gone. */
export function trackExitingAgent(runKey: string, done: Promise<void>): void {
  const pending = exiting.get(runKey) ?? new Set<Promise<void>>();
  exiting.set(runKey, pending);
  // Settles, never rejects: whoever tracks an agent reports its own failures, and nobody awaits this one but a next agent.
  const tracked = done.catch(() => undefined).finally(() => {
    pending.delete(tracked);
    if (pending.size === 0 && exiting.get(runKey) === pending) exiting.delete(runKey);
  });
  pending.add(tracked);
}

/** Resolves once every agent of `runKey` that was still exiting is gone (at once when there is none). */
export async function agentsExited(runKey: string): Promise<void> {
  const pending = exiting.get(runKey);
  if (pending) await Promise.all([...pending]);
}

/** Resolves once every exiting agent of this worker is gone (worker shutdown). */
export async function allAgentsExited(): Promise<void> {
  await Promise.all([...exiting.values()].flatMap((pending) => [...pending]));
}
