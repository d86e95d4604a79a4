import { randomUUID } from 'node:crypto';
import { link, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Worker, type Logger, type LogLevel, type LogMetadata, type WorkerOptions } from '@temporalio/worker';
import { readOwnFile } from '../activities/workspace/own-files.js';
import { openWorkerSubfolder, workerFolder } from '../activities/workspace/worker-folder.js';
import type { RunOwnerClaim } from '../contracts/run-owner.js';
import { ConfigError } from '../errors.js';

/**
 * One owner per run, on the worker's side (Temporal's worker-specific task queues, as in its file-processing and
 * activities-sticky-queues samples): besides the run's shared queue, each worker process polls two queues of its own,
 * one for the activities of the runs it holds and one, always free, that answers pings (a busy owner is not a gone one).
 */

/** The setting that gives a worker process an owner id of its own. */
export const OWNER_ID_VARIABLE = 'AGENT_PIPELINE_OWNER_ID';
const OWNER_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * The id that names this worker's own queues. What a run needs from its owner is the disk that holds its workspace, so
 * by default every worker on one workspaces folder has the same id, kept in the workers' own folder: a worker
 * restarted on the same disk (a deploy, a key rotation) takes its runs back at once instead of waiting out
 * AGENT_PIPELINE_OWNER_TIMEOUT, and workers on one shared volume serve one another's runs. `AGENT_PIPELINE_OWNER_ID`
 * gives a process an id of its own (processes that stand for separate hosts).
 * @throws ConfigError for a malformed AGENT_PIPELINE_OWNER_ID
 */
export async function ownerIdFor(workspacesRoot: string, env: NodeJS.ProcessEnv): Promise<string> {
  const given = env[OWNER_ID_VARIABLE]?.trim();
  if (given) {
    if (!OWNER_ID.test(given)) throw new ConfigError(`[CONFIG_INVALID] ${OWNER_ID_VARIABLE}=${given} is not an owner id: use 1 to 64 letters, digits, '.', '_' or '-'`);
    return given;
  }
  await openWorkerSubfolder(workspacesRoot, 'runs');
  const file = path.join(workerFolder(workspacesRoot), 'owner-id');
  const kept = async (): Promise<string | undefined> => (await readOwnFile(file, 256))?.toString('utf8').trim().match(OWNER_ID)?.[0];
  const existing = await kept();
  if (existing) return existing;
  // Written whole, then linked into place: of two workers starting at once on a new folder, the first link wins and
  // the other reads its id.
  const temp = `${file}.${randomUUID()}.tmp`;
  await writeFile(temp, `${randomUUID()}\n`, { flag: 'wx' });
  try {
    await link(temp, file).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  } finally {
    await rm(temp, { force: true });
  }
  const id = await kept();
  if (!id) throw new ConfigError(`[CONFIG_INVALID] ${file} does not hold an owner id: remove it and start the worker again`);
  return id;
}

/** This worker's claim: its own queues (named after the shared one, so an operator sees whose they are) for `ownerId`. */
export function ownerClaim(taskQueue: string, identity: string | undefined, windowMs: number, ownerId: string): RunOwnerClaim {
  const own = `${taskQueue}@owner-${ownerId}`;
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
  return [work, ping].map(quietAboutNoWorkflows);
}

/** What the SDK warns, when a Worker starts, of a Worker given no workflows. */
export const NO_WORKFLOWS_WARNING = 'No workflows registered, not polling for workflow tasks';

/**
 * `worker`, without the SDK's warning that it has no workflows: the owner's Workers run activities only, by design,
 * and the warning (one a queue, at every start) told operators of a fault there is not. The SDK gives every Worker
 * the Runtime's one logger, with no filter of its own, and reads it from the Worker's `logger` when `run()` starts
 * polling: that logger is swapped for one that drops this one warning and passes on everything else.
 */
export function quietAboutNoWorkflows(worker: Worker): Worker {
  const internal = worker as unknown as { logger?: Logger };
  if (internal.logger) internal.logger = withoutNoWorkflowsWarning(internal.logger);
  return worker;
}

/** `logger`, dropping the SDK's no-workflows warning. */
export function withoutNoWorkflowsWarning(logger: Logger): Logger {
  const dropped = (level: LogLevel, message: string): boolean => level === 'WARN' && message === NO_WORKFLOWS_WARNING;
  return {
    log: (level: LogLevel, message: string, meta?: LogMetadata) => (dropped(level, message) ? undefined : logger.log(level, message, meta)),
    trace: (message: string, meta?: LogMetadata) => logger.trace(message, meta),
    debug: (message: string, meta?: LogMetadata) => logger.debug(message, meta),
    info: (message: string, meta?: LogMetadata) => logger.info(message, meta),
    warn: (message: string, meta?: LogMetadata) => (dropped('WARN', message) ? undefined : logger.warn(message, meta)),
    error: (message: string, meta?: LogMetadata) => logger.error(message, meta),
  };
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
