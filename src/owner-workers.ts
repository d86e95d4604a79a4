import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import type { RunOwnerClaim } from './contracts/run-owner.js';

/**
 * One owner per run, on the worker's side (Temporal's worker-specific task queues, as in its file-processing and
 * activities-sticky-queues samples): besides the run's shared queue, each worker process polls two queues of its own,
 * one for the activities of the runs it holds and one, always free, that answers pings (a busy owner is not a gone one).
 */

/** This worker's claim: its own queues, named after the shared one so an operator sees whose they are. */
export function ownerClaim(taskQueue: string, identity: string | undefined, windowMs: number): RunOwnerClaim {
  const own = `${taskQueue}@owner-${randomUUID()}`;
  return { taskQueue: own, pingQueue: `${own}-ping`, identity: identity ?? `${process.pid}@${os.hostname()}`, windowMs };
}

/** The worker options an activity-only Worker on one of the owner's queues takes from the shared queue's Worker. */
type SharedOptions = Omit<WorkerOptions, 'taskQueue' | 'workflowBundle' | 'workflowsPath' | 'activities' | 'sinks'> & Pick<WorkerOptions, 'activities'>;

/** The Workers of the owner's two queues: the run's activities with the worker's stage slots, and the pings. */
export async function createOwnerWorkers(claim: RunOwnerClaim, shared: SharedOptions): Promise<Worker[]> {
  const { maxCachedWorkflows: _cached, maxConcurrentWorkflowTaskExecutions: _tasks, ...activityOptions } = shared;
  const work = await Worker.create({ ...activityOptions, taskQueue: claim.taskQueue });
  const ping = await Worker.create({
    ...activityOptions,
    taskQueue: claim.pingQueue,
    activities: { pingRunOwner: async () => claim.identity },
    maxConcurrentActivityTaskExecutions: 2,
    activityTaskPollerBehavior: { type: 'simple-maximum', maximum: 1 },
  });
  return [work, ping];
}

/**
 * Makes `worker` run and stop its owner Workers with it, so `createPipelineWorker` still returns one `Worker` whose
 * `run()`, `runUntil()` and `shutdown()` cover all three (a signal reaches each of them through the runtime anyway). One
 * that fails stops the others: a worker that cannot serve its runs' queues must not go on claiming runs.
 */
export function runWithOwnerWorkers(worker: Worker, owners: Worker[]): void {
  const runShared = worker.run.bind(worker);
  const shutdownShared = worker.shutdown.bind(worker);
  const stop = (w: Worker): void => {
    if (w.getState() === 'RUNNING') w.shutdown();
  };
  worker.shutdown = () => {
    shutdownShared();
    owners.forEach(stop);
  };
  worker.run = async () => {
    const running = owners.map((owner) =>
      owner.run().catch((err: unknown) => {
        stop(worker);
        throw err;
      }),
    );
    try {
      await runShared();
    } finally {
      owners.forEach(stop);
      const failed = (await Promise.allSettled(running)).find((r) => r.status === 'rejected');
      // An owner Worker's failure is the reason the worker stopped.
      if (failed) throw failed.reason;
    }
  };
}
