/**
 * Agents whose stage already completed while the `claude` process was still shutting down (see `settleOnResult` in
 * agent-process.ts). The CLI spends about 20 ms after its result event writing session bookkeeping and tearing down;
 * the stage need not wait for that, but the next agent of the same run on this worker must: it may resume that
 * session, or retry the stage whose lock the exiting agent still holds. The worker keeps one, for its lifetime.
 */
export class ExitingAgents {
  private readonly exiting = new Map<string, Set<Promise<void>>>();

  /** Records an agent of `runKey` (the run's Claude config folder) that is still exiting; `done` settles once it is gone. */
  track(runKey: string, done: Promise<void>): void {
    const pending = this.exiting.get(runKey) ?? new Set<Promise<void>>();
    this.exiting.set(runKey, pending);
    // Settles, never rejects: whoever tracks an agent reports its own failures, and nobody awaits this one but a next agent.
    const tracked = done.catch(() => undefined).finally(() => {
      pending.delete(tracked);
      if (pending.size === 0 && this.exiting.get(runKey) === pending) this.exiting.delete(runKey);
    });
    pending.add(tracked);
  }

  /** Resolves once every agent of `runKey` that was still exiting is gone (at once when there is none). */
  async exited(runKey: string): Promise<void> {
    const pending = this.exiting.get(runKey);
    if (pending) await Promise.all([...pending]);
  }

  /** Resolves once every exiting agent is gone (worker shutdown). */
  async allExited(): Promise<void> {
    await Promise.all([...this.exiting.values()].flatMap((pending) => [...pending]));
  }
}
