import type { WorkflowHandle } from '@temporalio/client';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { linearPipeline } from '../lib/fixtures.js';
import { readWorkflowHistorySize, type WorkflowHistorySize } from '../lib/history.js';
import { readMemory, resetPeakRss, PeakSampler } from '../lib/proc.js';
import type { BenchmarkResult } from '../lib/results.js';
import type { BenchStack, PipelineSpec } from '../lib/stack.js';
import { elapsedMs, kbToMb, round } from '../lib/stats.js';

/*
 * Issue 20: runs of any size. How the history grows with the number of stages, a wide fan-out, and many runs at once.
 * Every stage answers like the issue's measurement: a ~0.9 KB summary and ~1.8 KB of outputs.
 */

/** A report in the output contract with about the summary and outputs the issue measured with. */
function bulkyReport(): string {
  const report = { success: true, summary: `Did the work. ${'Details of the work. '.repeat(45)}`, outputs: { notes: 'Notes on the work. '.repeat(95) } };
  return `Finished.\n\`\`\`json\n${JSON.stringify(report)}\n\`\`\``;
}
const BULKY_SCENARIO: ScenarioInput = { rules: [], fallback: { text: bulkyReport() } };

/** A 100 KB run input. */
const BIG_INPUT = 'x'.repeat(100 * 1024);
const API_DEFAULTS = { model: 'haiku', retries: 0, maxTokens: 2_000 };

/** `linearPipeline` with a declared `doc` input, which the last stage reads. */
function linearWithInput(name: string, stages: number): PipelineSpec {
  const spec = linearPipeline({ name, stages, backend: 'anthropic-api', defaults: API_DEFAULTS });
  const list = spec.stages as { prompt: string }[];
  list[list.length - 1].prompt = 'Last step; the document: {{inputs.doc}}';
  return { ...spec, inputs: { doc: { description: 'a long document', default: '' } } };
}

/** `start → f1..fN → join`. */
function fanOutPipeline(width: number): PipelineSpec {
  const ids = Array.from({ length: width }, (_, i) => `f${i + 1}`);
  return {
    name: `scale-fanout-${width}`,
    defaults: { backend: 'anthropic-api', ...API_DEFAULTS },
    stages: [
      { id: 'start', prompt: 'Split the work.' },
      ...ids.map((id) => ({ id, needs: ['start'], prompt: `Part ${id}.` })),
      { id: 'join', needs: ids, prompt: 'Join the parts.' },
    ],
  };
}

interface LinearRow {
  stages: number;
  inputKb: number;
  history: WorkflowHistorySize;
  wallMs: number;
}

async function measureLinear(stack: BenchStack, queue: string, stages: number, big: boolean): Promise<LinearRow> {
  const name = `scale-linear-${stages}${big ? '-big' : ''}`;
  const file = await stack.writePipeline(linearWithInput(name, stages));
  const startNs = process.hrtime.bigint();
  const handle = await stack.startPipeline(file, queue, stack.uniqueName(name), big ? { doc: BIG_INPUT } : {});
  await stack.expectCompleted(handle);
  const wallMs = elapsedMs(startNs);
  return { stages, inputKb: big ? 100 : 0, history: await readWorkflowHistorySize(stack.client, handle.workflowId), wallMs };
}

/** Runs `work` while sampling the worker's resident memory; its peak (VmHWM, reset first, and 100 ms samples). */
async function withPeakRss<T>(pid: number, work: () => Promise<T>): Promise<{ value: T; peakRssMb: number }> {
  resetPeakRss(pid);
  const sampler = new PeakSampler(() => readMemory(pid)?.rssKb ?? 0, 100);
  try {
    const value = await work();
    return { value, peakRssMb: kbToMb(Math.max(readMemory(pid)?.hwmKb ?? 0, sampler.stop().peak)) };
  } finally {
    sampler.stop();
  }
}

interface FanOut {
  width: number;
  wallMs: number;
  history: WorkflowHistorySize;
  peakRssMb: number;
}

async function measureFanOut(stack: BenchStack, queue: string, pid: number, width: number): Promise<FanOut> {
  const file = await stack.writePipeline(fanOutPipeline(width));
  const { value, peakRssMb } = await withPeakRss(pid, async () => {
    const startNs = process.hrtime.bigint();
    const handle = await stack.startPipeline(file, queue);
    await stack.expectCompleted(handle);
    return { wallMs: elapsedMs(startNs), handle };
  });
  return { width, wallMs: value.wallMs, history: await readWorkflowHistorySize(stack.client, value.handle.workflowId), peakRssMb };
}

interface Burst {
  runs: number;
  stages: number;
  wallMs: number;
  completed: number;
  peakRssMb: number;
}

async function measureBurst(stack: BenchStack, queue: string, pid: number, runs: number, stages: number): Promise<Burst> {
  const file = await stack.writePipeline(linearPipeline({ name: `scale-burst-${stages}`, stages, backend: 'anthropic-api', defaults: API_DEFAULTS }));
  const { value, peakRssMb } = await withPeakRss(pid, async () => {
    const startNs = process.hrtime.bigint();
    const handles: WorkflowHandle[] = await Promise.all(Array.from({ length: runs }, () => stack.startPipeline(file, queue)));
    const outcomes = await Promise.all(handles.map((h) => stack.finish(h)));
    return { wallMs: elapsedMs(startNs), completed: outcomes.filter(Boolean).length };
  });
  return { runs, stages, ...value, peakRssMb };
}

const kb = (bytes: number): number => round(bytes / 1024, 1);

/**
 * History bytes per stage of linear runs of 40, 80, 160 and 400 stages (and 400 with a 100 KB input, and the issue's
 * 10 stages with a 100 KB input), a 500-wide fan-out and join, and 100 runs of 50 stages at once, all on one worker.
 */
export async function benchScale(stack: BenchStack, quick: boolean, log: (line: string) => void): Promise<BenchmarkResult> {
  const queue = stack.uniqueName('scale');
  const worker = await stack.startWorker(queue, await stack.folder('workspaces'));
  stack.useScenario(BULKY_SCENARIO);
  const sizes = quick ? [10, 20] : [40, 80, 160, 400];
  const rows: LinearRow[] = [];
  for (const stages of sizes) {
    rows.push(await measureLinear(stack, queue, stages, false));
    log(`scale: ${stages} linear stages, ${kb(rows.at(-1)!.history.bytes)} KB of history`);
  }
  const bigRows: LinearRow[] = [];
  for (const stages of quick ? [10] : [10, 400]) bigRows.push(await measureLinear(stack, queue, stages, true));
  const fanOut = await measureFanOut(stack, queue, worker.pid, quick ? 50 : 500);
  log(`scale: ${fanOut.width}-wide fan-out in ${round(fanOut.wallMs / 1000, 1)} s`);
  const burst = await measureBurst(stack, queue, worker.pid, quick ? 10 : 100, quick ? 10 : 50);
  await worker.stop();

  const perStage = rows.map((r) => r.history.bytes / r.stages);
  const spread = Math.max(...perStage) / Math.min(...perStage);
  const big400 = bigRows.find((r) => r.stages === 400);
  const stagesPerS = round((burst.runs * burst.stages) / (burst.wallMs / 1000), 1);
  const goals = [spread <= 1.2, big400 === undefined || big400.history.bytes <= 5 * 1024 * 1024, fanOut.wallMs < 60_000, burst.completed === burst.runs];
  const row = (r: LinearRow): (string | number)[] => [
    `${r.stages} linear${r.inputKb ? `, ${r.inputKb} KB input` : ''}`,
    r.history.events,
    kb(r.history.bytes),
    kb(r.history.bytes / r.stages),
    r.history.executions,
    round(r.wallMs / 1000, 1),
  ];
  return {
    name: 'scale',
    title: 'Scale',
    method:
      'One worker process (default settings), the anthropic-api backend and the scripted model answering at once with a ~0.9 KB summary ' +
      'and ~1.8 KB of outputs per stage. History = historySizeBytes and events summed over every execution of the workflow id ' +
      '(from visibility, so runs that continue as new count whole). Peak RSS = the worker\'s VmHWM, reset before, and 100 ms samples.',
    repetitions: 1,
    headline:
      `${sizes.map((s, i) => `${kb(perStage[i])}`).join(' / ')} KB per stage at ${sizes.join('/')} stages; ` +
      `${big400 ? `400 + 100 KB input ${round(big400.history.bytes / 1024 / 1024, 2)} MB; ` : ''}` +
      `${fanOut.width}-wide fan-out ${round(fanOut.wallMs / 1000, 1)} s; ${burst.runs}×${burst.stages} at ${stagesPerS} stages/s`,
    goal: { text: 'bytes per stage flat within 20%; 400 stages + 100 KB input ≤ 5 MB; 500-wide fan-out < 60 s; all runs complete', met: goals.every(Boolean) },
    figures: {
      linear: rows.map((r) => ({ stages: r.stages, historyBytes: r.history.bytes, historyEvents: r.history.events, executions: r.history.executions, bytesPerStage: round(r.history.bytes / r.stages), wallMs: round(r.wallMs) })),
      bytesPerStageSpread: round(spread, 3),
      bigInput: bigRows.map((r) => ({ stages: r.stages, inputKb: r.inputKb, historyBytes: r.history.bytes, historyEvents: r.history.events, executions: r.history.executions, wallMs: round(r.wallMs) })),
      fanOut: { width: fanOut.width, wallMs: round(fanOut.wallMs), historyBytes: fanOut.history.bytes, historyEvents: fanOut.history.events, executions: fanOut.history.executions, peakRssMb: fanOut.peakRssMb },
      burst: { runs: burst.runs, stagesPerRun: burst.stages, wallMs: round(burst.wallMs), stagesPerS, completedRuns: burst.completed, peakRssMb: burst.peakRssMb },
    },
    table: {
      columns: ['run', 'history events', 'history KB', 'KB per stage', 'executions', 'wall s'],
      rows: [
        ...rows.map(row),
        ...bigRows.map(row),
        [`${fanOut.width}-wide fan-out + join (peak RSS ${fanOut.peakRssMb} MB)`, fanOut.history.events, kb(fanOut.history.bytes), kb(fanOut.history.bytes / (fanOut.width + 2)), fanOut.history.executions, round(fanOut.wallMs / 1000, 1)],
      ],
    },
    notes: [
      `Bytes per stage vary by ${round((spread - 1) * 100, 1)}% from the smallest to the largest of ${sizes.join('/')} stages (goal ≤ 20%).`,
      `${burst.runs} runs of ${burst.stages} linear stages started at once: ${burst.completed} of ${burst.runs} completed in ${round(burst.wallMs / 1000, 1)} s, ` +
        `${stagesPerS} stages/s, worker peak RSS ${burst.peakRssMb} MB.`,
      'The dev server, the worker, the client and the model server share the machine\'s cores.',
    ],
    durationS: 0,
  };
}
