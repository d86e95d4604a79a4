import type { CapturedCall } from '../lib/claude-capture.js';
import type { BenchmarkResult } from '../lib/results.js';
import type { BenchStack } from '../lib/stack.js';
import { benchBigOutput } from './big-output.js';
import { benchCheckpoints } from './checkpoints.js';
import { benchClaimCheck } from './claim-check.js';
import { benchCost } from './cost.js';
import { benchEncryption } from './encryption.js';
import { benchFork } from './fork.js';
import { benchCliConcurrency } from './cli-concurrency.js';
import { runKillTrials, type KillTrial } from './kill-trials.js';
import { benchLeases } from './leases.js';
import { benchOverhead } from './overhead.js';
import { recoveryResult, resumeResult } from './recovery.js';
import { benchScale } from './scale.js';
import { benchStageLatency } from './stage-latency.js';
import { benchThroughput } from './throughput.js';
import { benchWorkerStart } from './worker-start.js';
import { benchWorkflowCpu } from './workflow-cpu.js';

/** What every benchmark gets. */
export interface BenchContext {
  stack: BenchStack;
  /** Smoke test: fewest repetitions, smaller loads. Figures are then not meaningful. */
  quick: boolean;
  log: (line: string) => void;
  /** Measurements two benchmarks share, made by whichever runs first. */
  shared: { calls?: CapturedCall[]; killTrials?: KillTrial[] };
}

export interface Benchmark {
  name: string;
  title: string;
  /** The goal as the issue states it, or `report`. */
  goal: string;
  run(context: BenchContext): Promise<BenchmarkResult>;
}

/** The claude calls of one latency run, replayed by the overhead loop; recorded here when stage-latency did not run. */
async function recordedCalls(context: BenchContext): Promise<CapturedCall[]> {
  context.shared.calls ??= (await benchStageLatency(context.stack, 1)).calls;
  return context.shared.calls;
}

/** The crash experiments behind recovery and resume: 3 with the session kept, 2 with it deleted. */
async function killTrials(context: BenchContext): Promise<KillTrial[]> {
  context.shared.killTrials ??= await runKillTrials(context.stack, context.quick ? 1 : 3, context.quick ? 1 : 2, context.log);
  return context.shared.killTrials;
}

/**
 * In run order. Repetitions keep a full run near 10 minutes on a loaded 2-core machine; the slow ones
 * (big output, crashes, bundling at start) run fewer times, as their results say.
 */
export const BENCHMARKS: Benchmark[] = [
  {
    name: 'worker-start',
    title: 'Worker start',
    goal: '≤ 2 s',
    run: (context) => benchWorkerStart(context.stack, context.quick ? 1 : 5, context.quick ? 0 : 1),
  },
  {
    name: 'stage-latency',
    title: 'Stage latency',
    goal: 'p50 ≤ 50 ms',
    async run(context) {
      const outcome = await benchStageLatency(context.stack, context.quick ? 1 : 4);
      context.shared.calls = outcome.calls;
      return outcome.result;
    },
  },
  {
    name: 'leases',
    title: 'Free lease',
    goal: 'report',
    run: (context) => benchLeases(context.stack, context.quick ? 5 : 40),
  },
  {
    name: 'overhead',
    title: 'Overhead',
    goal: 'vs hand loop ≤ 1.00 with warm start, ≤ 1.10 without',
    run: async (context) => benchOverhead(context.stack, context.quick ? 1 : 8, await recordedCalls(context)),
  },
  {
    name: 'encryption',
    title: 'Encrypted history',
    goal: 'overhead and stage latency within 5% of unencrypted',
    run: (context) => benchEncryption(context.stack, context.quick ? 1 : 6),
  },
  {
    name: 'claim-check',
    title: 'Claim check',
    goal: 'stage latency p50 with the claim check on and no large payloads within 5% of off',
    run: (context) => benchClaimCheck(context.stack, context.quick ? 1 : 10),
  },
  {
    name: 'cost',
    title: 'Prompt caching cost',
    goal: 'cached / uncached billed input ≤ 0.35',
    run: (context) => benchCost(context.stack),
  },
  {
    name: 'throughput',
    title: 'Throughput',
    goal: 'report',
    run: (context) => benchThroughput(context.stack, context.quick ? 20 : 200, context.quick ? 1 : 2),
  },
  {
    name: 'cli-concurrency',
    title: 'CLI concurrency',
    goal: 'report',
    run: (context) => benchCliConcurrency(context.stack, context.quick ? [1, 4] : [1, 4, 8, 16], context.quick ? 1 : 2),
  },
  {
    name: 'recovery',
    title: 'Recovery',
    goal: '≤ heartbeat timeout + 2 s',
    run: async (context) => recoveryResult(await killTrials(context)),
  },
  {
    name: 'resume',
    title: 'Resume',
    goal: '0 repeated turns with resume, 5 without',
    run: async (context) => resumeResult(await killTrials(context)),
  },
  {
    name: 'scale',
    title: 'Scale',
    goal: 'bytes per stage flat within 20%; 400 stages + 100 KB input ≤ 5 MB; 500-wide fan-out < 60 s; all runs complete',
    run: (context) => benchScale(context.stack, context.quick, context.log),
  },
  {
    name: 'checkpoints',
    title: 'Checkpoints',
    goal: 'checkpoint ≤ 300 ms, restore ≤ 3 s (50 MB repository, 100 KB change)',
    run: (context) => benchCheckpoints(context.stack, context.quick ? 1 : 5),
  },
  {
    name: 'fork',
    title: 'Fork',
    goal: 'a fork asks the model only for the stages it runs again, and ends sooner than starting again',
    run: (context) => benchFork(context.stack, context.quick ? 1 : 3),
  },
  {
    name: 'big-output',
    title: 'Big output',
    goal: 'worker RSS growth ≤ 50 MB',
    run: (context) => benchBigOutput(context.stack, context.quick ? 20 : 200),
  },
  {
    name: 'workflow-cpu',
    title: 'Workflow CPU per activation',
    goal: '1,000 stages on an S3 store complete with no workflow task over 1 s; status --json, list and a 20 MB --input @file work',
    run: (context) => benchWorkflowCpu(context.stack, context.quick, context.log),
  },
];
