import type { WorkflowHandle } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import { execa, type ResultPromise } from 'execa';
import { readdir, readlink } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ModelServer } from '../../src/dev/model-server.js';
import { createHarness, type Harness, type HarnessOptions } from '../helpers/harness.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/** A real worker process (`node dist/worker.js`), in its own process group so a "host crash" kills its agents too. */
export interface WorkerProcess {
  readonly pid: number;
  /** SIGKILL the worker and every process it started, like a machine that dies. */
  crash(): Promise<void>;
  /** SIGTERM and wait: a graceful stop. */
  stop(): Promise<void>;
  output(): string;
}

/**
 * These workers are killed to see another take over: a run whose owner dies moves once its stage waited this long on
 * the dead owner's queue and the ping went unanswered as long (60 s each by default).
 */
const OWNER_TIMEOUT = '3s';

/**
 * A run whose worker is killed goes on once its next workflow task has waited this long for the dead worker that had
 * the run cached (10 s by default); a live worker slower than that only costs a replay elsewhere.
 */
const STICKY_TIMEOUT = '2s';

/** Each process stands for a host of its own: its own owner queues, though all share one workspaces folder here. */
const ownHost = (): NodeJS.ProcessEnv => ({ AGENT_PIPELINE_OWNER_TIMEOUT: OWNER_TIMEOUT, AGENT_PIPELINE_STICKY_TIMEOUT: STICKY_TIMEOUT, AGENT_PIPELINE_OWNER_ID: `host-${randomUUID()}` });

/** `env` as a killable host's worker has it (a process here, or one in the test's process): its own host, a short grace. */
export function ownHostEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...ownHost(), ...env, AGENT_PIPELINE_SHUTDOWN_GRACE: '2s' };
}

export function startWorkerProcess(env: NodeJS.ProcessEnv): WorkerProcess {
  let output = '';
  const child: ResultPromise = execa('node', [path.join(PROJECT_ROOT, 'dist', 'worker.js')], {
    env: ownHostEnvironment(env),
    extendEnv: false,
    detached: true,
    reject: false,
    stdin: 'ignore',
    all: true,
    cleanup: true,
  });
  child.all?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const pid = child.pid!;
  return {
    pid,
    async crash() {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // already gone
      }
      await child;
    },
    async stop() {
      child.kill('SIGTERM');
      await child;
    },
    output: () => output,
  };
}

/**
 * Plain worker processes (`node dist/worker.js`) in the test's own process group: a SIGKILL of one kills the worker
 * alone and leaves its agents to the dead worker's watchdog. Keeps the tail of what they all printed, for the message
 * of a failed wait.
 */
export class WorkerProcesses {
  private readonly started: ResultPromise[] = [];
  private tail = '';

  start(env: NodeJS.ProcessEnv): ResultPromise {
    const worker = execa('node', [path.join(PROJECT_ROOT, 'dist', 'worker.js')], { env: { ...ownHost(), ...env }, extendEnv: false, reject: false, all: true });
    worker.all?.on('data', (chunk: Buffer) => {
      this.tail = `${this.tail}${chunk.toString()}`.slice(-4_000);
    });
    this.started.push(worker);
    return worker;
  }

  output(): string {
    return this.tail;
  }

  /** SIGKILLs every worker still running and waits for each. */
  async killAll(): Promise<void> {
    for (const worker of this.started) worker.kill('SIGKILL');
    await Promise.all(this.started.map((worker) => worker.catch(() => undefined)));
  }
}

/** Waits until the model server has received a request matching `accept` (e.g. a given rule and turn). */
export async function waitForRequest(
  server: ModelServer,
  accept: (r: ReturnType<ModelServer['requests']>[number]) => boolean,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (server.requests().some(accept)) return;
    await sleep(100);
  }
  const seen = server.requests().map((r) => `${r.rule ?? '-'}#${r.turn ?? '-'} ${r.status}`);
  throw new Error(`no matching model request within ${timeoutMs} ms; seen: ${seen.join(', ') || 'none'}`);
}

/** Processes whose working directory is inside `dir` (the agents of a run), from /proc. */
export async function processesWorkingIn(dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cwd = await readlink(`/proc/${entry}/cwd`).catch(() => undefined);
    if (cwd && (cwd === dir || cwd.startsWith(`${dir}/`))) found.push(entry);
  }
  return found;
}

/** A test's own queue (a harness without an in-process worker) and the worker processes it starts on it. */
export interface HostsWorld {
  harness: Harness;
  /** Starts one more worker process on the harness's queue: a host of its own, killed when the test ends. */
  worker(env?: NodeJS.ProcessEnv): WorkerProcess;
}

/**
 * A harness of the test's own, so that tests killing hosts can run at once (`test.concurrent`): a worker started by one
 * test never takes another test's run. Its workers are SIGKILLed and the harness closed when the test ends.
 */
export async function hostsWorld(name: string, options: Omit<HarnessOptions, 'worker'>, onTestFinished: (fn: () => Promise<void>) => void): Promise<HostsWorld> {
  const harness = await createHarness(name, { ...options, worker: false });
  const workers: WorkerProcess[] = [];
  onTestFinished(async () => {
    await Promise.all(workers.map((w) => w.crash()));
    await harness.close();
  });
  return {
    harness,
    worker(env = {}) {
      const started = startWorkerProcess({ ...harness.env, ...env });
      workers.push(started);
      return started;
    },
  };
}

/**
 * The longest a workflow task of the run waited on a worker's sticky queue before it timed out there and went to the
 * shared queue (0 when none did): after a worker dies, its runs' next tasks wait this long for it.
 * @unit milliseconds
 */
export async function longestStickyWaitMs(handle: WorkflowHandle): Promise<number> {
  const events = (await handle.fetchHistory()).events ?? [];
  const at = (e: (typeof events)[number]): number => Number(e.eventTime?.seconds ?? 0) * 1_000 + Math.floor((e.eventTime?.nanos ?? 0) / 1e6);
  const byId = new Map(events.map((e) => [String(e.eventId), e]));
  const waits = events.flatMap((e) => {
    const timedOut = e.workflowTaskTimedOutEventAttributes;
    const scheduled = timedOut ? byId.get(String(timedOut.scheduledEventId)) : undefined;
    return scheduled ? [at(e) - at(scheduled)] : [];
  });
  return Math.max(0, ...waits);
}
