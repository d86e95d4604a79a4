import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { tsToMs } from '@temporalio/common/lib/time.js';
import type { WorkflowHandle } from '@temporalio/client';
import { linearPipeline } from '../lib/fixtures.js';
import type { BenchmarkResult } from '../lib/results.js';
import type { BenchStack } from '../lib/stack.js';
import { firstLine, median, round } from '../lib/stats.js';

const GOAL_MS = 2_000;
/** temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW (@temporalio/proto is not a direct dependency). */
const TASK_QUEUE_TYPE_WORKFLOW = 1;
/** The comparison worker that bundles workflows with webpack at start (compiled next to this file's folder). */
const NO_BUNDLE_SCRIPT = fileURLToPath(new URL('../worker-without-bundle.js', import.meta.url));

interface StartSample {
  /** Spawn → the worker's "polling" log line, right after Worker.create. @unit milliseconds */
  toLogMs: number;
  /** Spawn → the server records the worker's first poll on the queue (DescribeTaskQueue's poller lastAccessTime). @unit milliseconds */
  toFirstPollMs: number;
  /** Spawn → the server hands it the run already waiting on the queue (WorkflowTaskStarted). @unit milliseconds */
  toFirstTaskMs: number;
}

/** Resolves with the time the server first saw a workflow-task poller on `taskQueue`. */
async function firstPollAt(stack: BenchStack, taskQueue: string, stop: AbortSignal): Promise<number> {
  while (!stop.aborted) {
    const { pollers } = await stack.client.workflowService.describeTaskQueue({
      namespace: 'default',
      taskQueue: { name: taskQueue },
      taskQueueType: TASK_QUEUE_TYPE_WORKFLOW,
    });
    const times = (pollers ?? []).map((p) => tsToMs(p.lastAccessTime));
    if (times.length > 0) return Math.min(...times);
    await sleep(10);
  }
  return Number.NaN;
}

/** The WorkflowTaskStarted time of a run's first workflow task, once there is one. */
async function firstTaskStartedAt(handle: WorkflowHandle): Promise<number> {
  for (;;) {
    const history = await handle.fetchHistory();
    const started = history.events?.find((e) => e.workflowTaskStartedEventAttributes);
    if (started) return tsToMs(started.eventTime);
    await sleep(20);
  }
}

/** Starts a worker for a fresh queue on which a run already waits, and times it to its log line, its first poll and its first task. */
async function measureStart(stack: BenchStack, file: string, script?: string): Promise<StartSample> {
  const queue = stack.uniqueName('worker-start');
  const handle = await stack.startPipeline(file, queue);
  const stop = new AbortController();
  const polled = firstPollAt(stack, queue, stop.signal);
  try {
    const worker = await stack.startWorker(queue, await stack.folder('workspaces'), {}, script);
    const [pollAt, taskAt] = await Promise.all([polled, firstTaskStartedAt(handle)]);
    await handle.terminate('worker-start benchmark: only the first task matters');
    await worker.stop('SIGKILL');
    return { toLogMs: worker.readyMs, toFirstPollMs: pollAt - worker.spawnedAt, toFirstTaskMs: taskAt - worker.spawnedAt };
  } finally {
    stop.abort();
    await polled.catch(() => undefined);
  }
}

/**
 * Process start → polling for `node dist/worker.js` with the prebuilt workflow bundle, `reps` times; and, for
 * comparison, `noBundleReps` times for a worker that bundles the workflows when it starts.
 */
export async function benchWorkerStart(stack: BenchStack, reps: number, noBundleReps: number): Promise<BenchmarkResult> {
  const file = await stack.writePipeline(linearPipeline({ name: 'bench-worker-start', stages: 1 }));
  await measureStart(stack, file); // warm-up: page cache, the server's first queue
  const samples: StartSample[] = [];
  for (let i = 0; i < reps; i += 1) samples.push(await measureStart(stack, file));
  const withoutBundle: StartSample[] = [];
  const notes: string[] = [];
  try {
    for (let i = 0; i < noBundleReps; i += 1) withoutBundle.push(await measureStart(stack, file, NO_BUNDLE_SCRIPT));
  } catch (err) {
    notes.push(`The comparison worker that bundles at start failed: ${firstLine(err)}`);
  }

  const p50 = (key: keyof StartSample, of = samples): number => round(median(of.map((s) => s[key])));
  const toPoll = p50('toFirstPollMs');
  const noBundle = withoutBundle.length > 0 ? p50('toFirstPollMs', withoutBundle) : null;
  notes.push(
    `A run already waiting on the queue got its first workflow task ${p50('toFirstTaskMs')} ms after the spawn (samples ${samples.map((s) => round(s.toFirstTaskMs)).join(', ')}). ` +
      'Where that is about a second after the first poll, the server had put the waiting task in its backlog and handed it out on its next read, a server-side delay rather than a worker cost.',
  );
  return {
    name: 'worker-start',
    title: 'Worker start',
    method:
      `\`node dist/worker.js\` with the prebuilt dist/workflow-bundle.js, ${reps} starts after a warm-up, each on a fresh task queue: ` +
      'spawn → the first workflow-task poll the server records (DescribeTaskQueue, the earliest poller lastAccessTime, sampled every 10 ms); also spawn → ' +
      `the worker's "polling" log line, and spawn → the first task of a run already waiting. For comparison, ${noBundleReps === 1 ? 'one start' : `${noBundleReps} starts`} of a worker that bundles the workflows with webpack as it starts.`,
    repetitions: reps,
    headline: `${toPoll} ms to the first poll${noBundle === null ? '' : `; ${noBundle} ms when bundling at start`}`,
    goal: { text: '≤ 2 s', met: toPoll <= GOAL_MS },
    figures: {
      toFirstPollMsP50: toPoll,
      toLogLineMsP50: p50('toLogMs'),
      toFirstTaskMsP50: p50('toFirstTaskMs'),
      toFirstPollMs: samples.map((s) => round(s.toFirstPollMs)),
      withoutPrebuiltBundleToFirstPollMs: noBundle,
    },
    notes,
    durationS: 0,
  };
}
