import type { Client } from '@temporalio/client';
import type { PayloadCodec } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { startBenchStore } from '../lib/bench-store.js';
import { linearPipeline } from '../lib/fixtures.js';
import type { BenchmarkResult } from '../lib/results.js';
import { PROJECT_ROOT, type BenchStack } from '../lib/stack.js';
import { elapsedMs, round } from '../lib/stats.js';
import { bigInputRun, readLongRun, type ReaderCheck } from './long-run-readers.js';

/*
 * Issue 29: the workflow's per-activation CPU. A long linear API run, every stage answering ~3 KB; each workflow task's
 * time is read from the run's history (task started to task completed, as the server saw it, over every execution), and
 * grouped by how many stages the run had settled when the task ran. Flat groups mean each activation is O(changed
 * stages); growing ones mean it does work in proportion to the run.
 */

/** A report of about 3 KB: a ~0.9 KB summary and ~2 KB of outputs. */
function report(): string {
  const answer = { success: true, summary: `Did the work. ${'Details of the work. '.repeat(45)}`, outputs: { notes: 'Notes on the work. '.repeat(105) } };
  return `Finished.\n\`\`\`json\n${JSON.stringify(answer)}\n\`\`\``;
}
const SCENARIO: ScenarioInput = { rules: [], fallback: { text: report() } };

interface TaskTime {
  /** Stage activities completed before the task, counted over every execution. */
  settled: number;
  ms: number;
}

/** Every workflow task of every execution of `workflowId`, oldest first. */
async function taskTimes(client: Client, workflowId: string): Promise<TaskTime[]> {
  const runIds: string[] = [];
  for await (const execution of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runIds.push(execution.runId);
  const times: TaskTime[] = [];
  let settled = 0;
  for (const runId of runIds.reverse()) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    let startedAt: number | undefined;
    for (const event of history.events ?? []) {
      const at = Number(event.eventTime?.seconds ?? 0) * 1000 + Math.floor((event.eventTime?.nanos ?? 0) / 1e6);
      if (event.workflowTaskStartedEventAttributes) startedAt = at;
      if (event.workflowTaskCompletedEventAttributes && startedAt !== undefined) times.push({ settled, ms: at - startedAt });
      if (event.activityTaskCompletedEventAttributes) settled += 1;
    }
  }
  return times;
}

/**
 * Waits until the run has completed, or has run every stage and then not completed within a minute (a final result
 * over the payload limit fails its last task again and again), which is terminated. Whether it completed.
 */
async function untilSettled(client: Client, workflowId: string, stages: number): Promise<boolean> {
  const handle = client.workflow.getHandle(workflowId);
  let lastAt: number | undefined;
  for (;;) {
    const { status } = await handle.describe();
    if (status.name === 'COMPLETED') return true;
    const settled = (await taskTimes(client, workflowId)).at(-1)?.settled ?? 0;
    // The server terminates a run whose final result is over the limit.
    if (status.name === 'TERMINATED' && settled >= stages) return false;
    if (status.name !== 'RUNNING' && status.name !== 'CONTINUED_AS_NEW') throw new Error(`run ${workflowId} ended ${status.name}`);
    if (settled >= stages) lastAt ??= Date.now();
    if (lastAt !== undefined && Date.now() - lastAt > 60_000) {
      await handle.terminate('workflow-cpu bench: every stage ran, the run did not complete').catch(() => undefined);
      return false;
    }
    await new Promise((resolve) => setTimeout(resolve, 5_000));
  }
}

/**
 * How long replaying the run's last execution takes in this process: what a worker pays for the run's next task when
 * it no longer has the run cached (it restarted, evicted the run, or a task failed). The sum of every activation's
 * work, so it grows with the square of the run when an activation grows with the run. `BENCH_WORKFLOW_CPU_HISTORY`
 * keeps the history in that file, to replay it against another build.
 */
async function replayMs(client: Client, workflowId: string, codecs: PayloadCodec[]): Promise<number> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  if (process.env.BENCH_WORKFLOW_CPU_HISTORY) await writeFile(process.env.BENCH_WORKFLOW_CPU_HISTORY, JSON.stringify(history));
  const startNs = process.hrtime.bigint();
  // With the store's codecs, as a worker replays: the history holds references to payloads the claim check moved out.
  await Worker.runReplayHistory({ workflowBundle: { codePath: path.join(PROJECT_ROOT, 'dist', 'workflow-bundle.js') }, dataConverter: { payloadCodecs: codecs } }, history, workflowId);
  return elapsedMs(startNs);
}

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
};

/**
 * A linear run of `stages` API stages on one worker process whose store is S3 (versitygw), its workflow tasks' times by
 * tenth of the run; then the CLI's readers of it, and a run with a 20 MB input.
 */
export async function benchWorkflowCpu(stack: BenchStack, quick: boolean, log: (line: string) => void): Promise<BenchmarkResult> {
  const stages = Number(process.env.BENCH_WORKFLOW_CPU_STAGES) || (quick ? 60 : 1_000);
  const queue = stack.uniqueName('workflow-cpu');
  const store = await startBenchStore(stack, log);
  try {
    const env = stack.workerEnv(queue, await stack.folder('workspaces'), store.env);
    const worker = await stack.startWorker(queue, env.AGENT_PIPELINE_WORKSPACES!, store.env);
    stack.useScenario(SCENARIO);
    const file = await stack.writePipeline(linearPipeline({ name: `workflow-cpu-${stages}`, stages, backend: 'anthropic-api', defaults: { model: 'haiku', retries: 0, maxTokens: 2_000 } }));
    const startNs = process.hrtime.bigint();
    const handle = await stack.startPipeline(file, queue, stack.uniqueName('run'), {}, store.client);
    const completed = await untilSettled(store.client, handle.workflowId, stages);
    const wallMs = elapsedMs(startNs);
    const readers = completed ? await readLongRun(env, handle.workflowId, stages) : [];
    readers.push(await bigInputRun(stack, store, env));
    for (const check of readers) log(`workflow-cpu: ${check.what}: ${check.ok ? 'ok' : 'FAILED'} in ${round(check.ms)} ms (${check.detail})`);
    await worker.stop();
    const times = await taskTimes(store.client, handle.workflowId);
    const replay = await replayMs(store.client, handle.workflowId, store.codecs);
    return workflowCpuResult({ stages, store: store.kind, completed, wallMs, times, replay, readers }, log);
  } finally {
    await store.stop();
  }
}

interface LongRun {
  stages: number;
  store: string;
  completed: boolean;
  wallMs: number;
  times: TaskTime[];
  replay: number;
  readers: ReaderCheck[];
}

function workflowCpuResult({ stages, store, completed, wallMs, times, replay, readers }: LongRun, log: (line: string) => void): BenchmarkResult {
  const tenth = Math.max(1, Math.ceil(stages / 10));
  const groups = Array.from({ length: 10 }, (_, i) => times.filter((t) => Math.floor(t.settled / tenth) === i).map((t) => t.ms)).filter((g) => g.length > 0);
  const rows = groups.map((g, i) => [`${i * tenth}–${(i + 1) * tenth} stages`, g.length, percentile(g, 50), percentile(g, 95), Math.max(...g)]);
  const all = times.map((t) => t.ms);
  const worst = Math.max(...all);
  log(`workflow-cpu: ${stages} stages in ${round(wallMs / 1000, 1)} s; replay ${round(replay)} ms; workflow task p50 ${percentile(all, 50)} ms, max ${worst} ms`);
  return {
    name: 'workflow-cpu',
    title: 'Workflow CPU per activation',
    method:
      `One worker process (default settings, workflows cached) whose store (AGENT_PIPELINE_STORE) is ${store}, a ${stages}-stage linear run on the ` +
      'anthropic-api backend, the scripted model answering at once with ~3 KB (0.9 KB summary, 2 KB outputs), started by a client with the same ' +
      'store. Each workflow task = its started to completed event times in history. Then, with the same settings, the CLI: `status ID --json` and ' +
      '`list --json` of that run, and `start --input big=@FILE --wait` of a one-stage pipeline with a 20 MB file (the model must receive its last line).',
    repetitions: 1,
    headline: `${stages} stages (${completed ? 'completed' : 'did not complete'}, store ${store}): replay of the last execution ${round(replay)} ms; workflow task p50 ${percentile(all, 50)} ms, p95 ${percentile(all, 95)} ms, max ${worst} ms; last tenth p50 ${groups.at(-1) ? percentile(groups.at(-1)!, 50) : 0} ms; readers ${readers.filter((r) => r.ok).length}/${readers.length} ok`,
    goal: { text: 'the run completes, no workflow task over 1 s; status --json, list and a 20 MB --input @file work', met: completed && worst <= 1_000 && readers.every((r) => r.ok) },
    figures: {
      stages,
      store,
      completed,
      replayMs: round(replay),
      wallMs: round(wallMs),
      tasks: times.length,
      p50Ms: percentile(all, 50),
      p95Ms: percentile(all, 95),
      maxMs: worst,
      readers: readers.map((r) => ({ what: r.what, ok: r.ok, ms: round(r.ms), detail: r.detail })),
    },
    table: { columns: ['stages settled', 'tasks', 'p50 ms', 'p95 ms', 'max ms'], rows },
    notes: [
      ...readers.map((r) => `${r.what}: ${r.ok ? 'works' : 'FAILED'}, ${round(r.ms)} ms (the CLI's whole process, start-up included): ${r.detail}.`),
      ...(completed ? [] : ['The run did not complete after its last stage (its final result is over the 2 MB payload limit until the claim check moves it out, so the server terminated it): its tasks were measured all the same.']),
      'The dev server, the worker, the client and the model server share the machine\'s cores.',
    ],
    durationS: 0,
  };
}
