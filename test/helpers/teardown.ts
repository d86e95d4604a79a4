import type { Worker } from '@temporalio/worker';

/*
 * Teardown that cannot hang a hook for its whole 300 s. Twice in CI the lease-workflow file's afterAll (a test Worker's
 * shutdown, its run() awaited, the replay check, a connection closed) never ended, with nothing logged, and vitest said
 * only "Hook timed out in 300000ms": not which await it was. Each step here has a bound of its own and, past it, fails
 * with its name and what the Worker said of itself then.
 */

/** Thrown when a teardown step did not end within its bound: names the step, its bound and what was seen then. */
export class TeardownStepTimeoutError extends Error {
  override name = 'TeardownStepTimeoutError';
}

/** How long a connection gets to close. @unit milliseconds */
export const CLOSE_BOUND_MS = 30_000;
/** What a Worker's run() gets past its `shutdownForceTime` (after which the SDK gives up draining and fails it). @unit milliseconds */
const RUN_END_MARGIN_MS = 60_000;
/** A Worker's run() bound when it has no `shutdownForceTime`. @unit milliseconds */
const RUN_END_DEFAULT_MS = 120_000;

/**
 * `work`, or a {@link TeardownStepTimeoutError} after `ms` naming `step` and `detail()` at that moment. The work itself is
 * not stopped (nothing can stop it): the hook fails in its own words, at once, instead of 300 s later in vitest's.
 */
export async function boundedStep<T>(step: string, work: Promise<T>, ms: number, detail?: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TeardownStepTimeoutError(`${step} did not end within ${ms / 1000} s${detail ? ` (${detail()})` : ''}`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Stops a test's Worker: `shutdown()` when it still runs, then its `run()` (`running`) awaited within its
 * `shutdownForceTime` and a minute. A failed run() rejects as it did (a forced shutdown is the SDK's
 * GracefulShutdownPeriodExpiredError); one that never ends fails naming `name`, the Worker's state and its counts of
 * polls, activations and activities.
 */
export async function stopTestWorker(name: string, worker: Worker | undefined, running: Promise<void> | undefined): Promise<void> {
  if (!worker) return;
  if (worker.getState() === 'RUNNING') worker.shutdown();
  if (!running) return;
  const forceMs = worker.options.shutdownForceTimeMs;
  const bound = forceMs === undefined ? RUN_END_DEFAULT_MS : forceMs + RUN_END_MARGIN_MS;
  await boundedStep(`${name}: the Worker's run() after shutdown()`, running, bound, () => `Worker ${JSON.stringify(worker.getStatus())}${workflowThreadsOf(worker)}`);
}

/**
 * Where a run() that got past its state STOPPED hangs, read from the SDK's internals when they are there (1.24): each
 * workflow thread asked to stop (the SDK's finalizeShutdown is over) and gone (its thread teardown too).
 */
function workflowThreadsOf(worker: Worker): string {
  type Thread = { shutDownRequested?: boolean; workerExited?: boolean };
  const threads = (worker as unknown as { workflowCreator?: { workerThreadClients?: Thread[] } }).workflowCreator?.workerThreadClients;
  if (!Array.isArray(threads)) return '';
  return `, workflow threads ${JSON.stringify(threads.map((t) => ({ askedToStop: t.shutDownRequested, exited: t.workerExited })))}`;
}

/** Closes a NativeConnection a test made (a Worker never closes one it was given), within {@link CLOSE_BOUND_MS}. */
export async function closeTestConnection(name: string, connection: { close(): Promise<void> } | undefined): Promise<void> {
  if (connection) await boundedStep(`${name}: closing its connection`, connection.close(), CLOSE_BOUND_MS);
}
