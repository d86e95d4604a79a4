import { parallelPipeline, reportText } from '../lib/fixtures.js';
import { isAgentProcess, PeakSampler, processTree, sumRssKb } from '../lib/proc.js';
import type { BenchmarkResult } from '../lib/results.js';
import type { BenchStack } from '../lib/stack.js';
import { elapsedMs, kbToMb, median, round } from '../lib/stats.js';

/** The worker may run this many stages at once, so that every level below really runs all its stages together. */
const WORKER_LIMIT = 16;
/** The model wait of the second variant: an agent that mostly waits on the model, as real ones do. @unit milliseconds */
const MODEL_WAIT_MS = 2_000;
const WAIT_MARKER = 'model wait';

interface Variant {
  key: 'instant' | 'modelWait';
  label: string;
  prompt: (id: string) => string;
}

const VARIANTS: Variant[] = [
  { key: 'instant', label: 'zero model latency', prompt: (id) => `Benchmark task for stage ${id}: reply with the report.` },
  { key: 'modelWait', label: `${MODEL_WAIT_MS / 1000} s model latency`, prompt: (id) => `Benchmark task for stage ${id} (${WAIT_MARKER}): reply with the report.` },
];

interface LevelSample {
  wallMs: number;
  peakTreeMb: number;
  peakAgents: number;
}

/** Runs one pipeline of `n` parallel stages and samples the worker's process tree until it ends. */
async function measureLevel(stack: BenchStack, queue: string, workerPid: number, n: number, variant: Variant): Promise<LevelSample> {
  const file = await stack.writePipeline(parallelPipeline({ name: `bench-concurrency-${n}`, stages: n, prompt: variant.prompt }));
  let peakAgents = 0;
  const sampler = new PeakSampler(() => {
    const tree = processTree(workerPid);
    peakAgents = Math.max(peakAgents, tree.filter(isAgentProcess).length);
    return sumRssKb(tree);
  }, 100);
  const startNs = process.hrtime.bigint();
  try {
    await stack.expectCompleted(await stack.startPipeline(file, queue));
    return { wallMs: elapsedMs(startNs), peakTreeMb: kbToMb(sampler.stop().peak), peakAgents };
  } finally {
    sampler.stop();
  }
}

/**
 * N CLI stages at once (one run of a pipeline with N independent stages) for each level, against one worker
 * process allowed {@link WORKER_LIMIT} concurrent stages: wall time and the peak summed RSS of the worker and
 * everything it spawned (agents and their tools), sampled from /proc every 100 ms.
 */
export async function benchCliConcurrency(stack: BenchStack, levels: number[], reps: number): Promise<BenchmarkResult> {
  const queue = stack.uniqueName('concurrency');
  const worker = await stack.startWorker(queue, await stack.folder('workspaces'), { AGENT_PIPELINE_MAX_CONCURRENT_STAGES: String(WORKER_LIMIT) });
  stack.useScenario({
    rules: [{ name: 'model-wait', match: WAIT_MARKER, turns: [{ text: reportText(), delayMs: MODEL_WAIT_MS }] }],
    fallback: { text: reportText() },
  });
  await measureLevel(stack, queue, worker.pid, 2, VARIANTS[0]); // warm-up
  const workerIdleMb = kbToMb(sumRssKb(processTree(worker.pid)));

  const rows: (string | number)[][] = [];
  const figures: Record<string, Record<string, number>> = {};
  for (const variant of VARIANTS) {
    for (const n of levels) {
      const samples: LevelSample[] = [];
      for (let r = 0; r < reps; r += 1) samples.push(await measureLevel(stack, queue, worker.pid, n, variant));
      const wallMs = round(median(samples.map((s) => s.wallMs)), 0);
      const peakTreeMb = Math.max(...samples.map((s) => s.peakTreeMb));
      const perAgentMb = round((peakTreeMb - workerIdleMb) / n);
      const stagesPerS = round(n / (wallMs / 1000), 2);
      figures[`${variant.key}N${n}`] = { wallMs, peakTreeMb, perAgentMb, stagesPerS, peakAgents: Math.min(...samples.map((s) => s.peakAgents)) };
      rows.push([variant.label, n, wallMs, stagesPerS, peakTreeMb, perAgentMb, Math.min(...samples.map((s) => s.peakAgents))]);
    }
  }
  await worker.stop();

  const top = levels[levels.length - 1];
  const instantTop = figures[`instantN${top}`];
  const waitTop = figures[`modelWaitN${top}`];
  return {
    name: 'cli-concurrency',
    title: 'CLI concurrency',
    method:
      `One run of a pipeline with N independent CLI stages, for N = ${levels.join(', ')}, on one worker process allowed ${WORKER_LIMIT} concurrent stages; ` +
      `${reps} runs per level, median wall time (start → result), peak summed RSS of the worker's process tree (worker, setpriv/claude, tools) sampled every 100 ms. ` +
      `Two model speeds: zero latency (start-up bound) and ${MODEL_WAIT_MS / 1000} s per answer (an agent waiting on the model). Worker idle: ${workerIdleMb} MB.`,
    repetitions: reps,
    headline: `N=${top}: ${instantTop.wallMs} ms, ${instantTop.peakTreeMb} MB (zero latency); ${waitTop.wallMs} ms with ${MODEL_WAIT_MS / 1000} s model wait`,
    goal: { text: 'report; choose the default concurrency', met: null },
    figures: { workerIdleMb, ...figures },
    table: { columns: ['model', 'N', 'wall ms', 'stages/s', 'peak MB (worker+agents)', 'MB per agent', 'agents seen at once'], rows },
    notes: VARIANTS.map((variant) => {
      const best = levels.reduce((a, b) => (figures[`${variant.key}N${b}`].stagesPerS > figures[`${variant.key}N${a}`].stagesPerS ? b : a));
      const perAgent = round(median(levels.map((n) => figures[`${variant.key}N${n}`].perAgentMb)));
      return `${variant.label}: most stages per second at N = ${best} (${figures[`${variant.key}N${best}`].stagesPerS}/s); about ${perAgent} MB per running agent on top of the worker.`;
    }),
    durationS: 0,
  };
}
