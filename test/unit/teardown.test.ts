import type { Worker } from '@temporalio/worker';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { boundedStep, stopTestWorker, TeardownStepTimeoutError } from '../helpers/teardown.js';

/** A Worker as stopTestWorker sees it: its state, shutdown(), its force time, its status and its workflow threads. */
function fakeWorker(state: string, shutdownForceTimeMs?: number, threads?: { shutDownRequested: boolean; workerExited: boolean }[]): Worker & { shutdowns: number } {
  const worker = {
    state,
    workflowCreator: threads && { workerThreadClients: threads },
    shutdowns: 0,
    options: { shutdownForceTimeMs },
    getState: () => worker.state,
    shutdown() {
      worker.shutdowns++;
      worker.state = 'STOPPED';
    },
    getStatus: () => ({ runState: worker.state, numInFlightWorkflowActivations: 0, hasOutstandingWorkflowPoll: false }),
  };
  return worker as unknown as Worker & { shutdowns: number };
}

describe('test teardown that cannot hang a hook', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  test("a Worker whose run() never ends fails within its force time and a minute, naming the step and the Worker's state", async () => {
    vi.useFakeTimers();
    const worker = fakeWorker('RUNNING', 30_000, [{ shutDownRequested: true, workerExited: false }]);
    const stopping = stopTestWorker('the lease Worker', worker, new Promise<void>(() => {}));
    const outcome = stopping.then(
      () => 'ended',
      (error: unknown) => error,
    );
    await vi.advanceTimersByTimeAsync(89_999);
    expect(await Promise.race([outcome, Promise.resolve('pending')])).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    const error = await outcome;
    expect(error).toBeInstanceOf(TeardownStepTimeoutError);
    expect((error as Error).message).toBe(
      "the lease Worker: the Worker's run() after shutdown() did not end within 90 s " +
        '(Worker {"runState":"STOPPED","numInFlightWorkflowActivations":0,"hasOutstandingWorkflowPoll":false}, workflow threads [{"askedToStop":true,"exited":false}])',
    );
    expect(worker.shutdowns).toBe(1);
  });

  test('a run() that failed rejects as it did, so that a caller can tell a forced shutdown from a hang', async () => {
    const failure = new Error('Timed out while waiting for worker to shutdown gracefully');
    await expect(stopTestWorker('a Worker', fakeWorker('RUNNING', 30_000), Promise.reject(failure))).rejects.toBe(failure);
  });

  test('a Worker that stopped already is not shut down again, and its ended run() ends the teardown', async () => {
    const worker = fakeWorker('FAILED');
    await stopTestWorker('a Worker', worker, Promise.resolve());
    expect(worker.shutdowns).toBe(0);
  });

  test('a step that ends in time gives its value and leaves no timer behind', async () => {
    vi.useFakeTimers();
    await expect(boundedStep('closing', Promise.resolve(7), 1_000)).resolves.toBe(7);
    expect(vi.getTimerCount()).toBe(0);
  });
});
