import { cpus } from 'node:os';
import type { WorkflowHandle } from '@temporalio/client';
import { INSTANT_REPORT_SCENARIO, linearPipeline } from '../lib/fixtures.js';
import { readCpuTime, readMemory, resetPeakRss, PeakSampler } from '../lib/proc.js';
import type { BenchmarkResult } from '../lib/results.js';
import type { BenchStack } from '../lib/stack.js';
import { elapsedMs, kbToMb, median, round } from '../lib/stats.js';

const STAGES = 3;

interface Sample {
  stagesPerS: number;
  wallMs: number;
  failedRuns: number;
  peakRssMb: number;
  idleRssMb: number;
  modelRequests: number;
  /** CPU used during the burst, by process. @unit milliseconds */
  cpuMs: { worker: number; server: number; bench: number };
}

/** Starts `runs` runs at once and waits for all of them; the worker's memory is sampled meanwhile. */
async function measureBurst(stack: BenchStack, file: string, queue: string, workerPid: number, runs: number): Promise<Sample> {
  stack.modelServer.reset();
  const idle = readMemory(workerPid)!;
  resetPeakRss(workerPid);
  const sampler = new PeakSampler(() => readMemory(workerPid)?.rssKb ?? 0, 100);
  const cpu = (): { worker: number; server: number; bench: number } => {
    const own = process.cpuUsage();
    return { worker: readCpuTime(workerPid).selfMs, server: readCpuTime(stack.devServer.pid).selfMs, bench: (own.user + own.system) / 1000 };
  };
  const cpuBefore = cpu();
  const startNs = process.hrtime.bigint();
  const handles: WorkflowHandle[] = await Promise.all(Array.from({ length: runs }, () => stack.startPipeline(file, queue)));
  const outcomes = await Promise.all(handles.map((h) => stack.finish(h)));
  const wallMs = elapsedMs(startNs);
  const sampled = sampler.stop();
  const hwmKb = readMemory(workerPid)?.hwmKb ?? 0;
  const cpuAfter = cpu();
  return {
    cpuMs: { worker: cpuAfter.worker - cpuBefore.worker, server: cpuAfter.server - cpuBefore.server, bench: round(cpuAfter.bench - cpuBefore.bench) },
    stagesPerS: (runs * STAGES) / (wallMs / 1000),
    wallMs,
    failedRuns: outcomes.filter((ok) => !ok).length,
    peakRssMb: kbToMb(Math.max(hwmKb, sampled.peak)),
    idleRssMb: kbToMb(idle.rssKb),
    modelRequests: stack.modelServer.requests().filter((r) => r.path === '/v1/messages').length,
  };
}

/**
 * `runs` runs of a 3-stage anthropic-api pipeline, all started at once against one worker process with the
 * default settings; the scripted model answers at once. Stages per second over the whole burst (first start
 * → last result) and the worker's peak RSS (VmHWM, reset before each burst, and 100 ms samples).
 */
export async function benchThroughput(stack: BenchStack, runs: number, bursts: number): Promise<BenchmarkResult> {
  const queue = stack.uniqueName('throughput');
  const worker = await stack.startWorker(queue, await stack.folder('workspaces'));
  stack.useScenario(INSTANT_REPORT_SCENARIO);
  const file = await stack.writePipeline(linearPipeline({ name: 'bench-throughput', stages: STAGES, backend: 'anthropic-api', defaults: { model: 'haiku' } }));
  await measureBurst(stack, file, queue, worker.pid, 5); // warm-up
  const samples: Sample[] = [];
  for (let i = 0; i < bursts; i += 1) samples.push(await measureBurst(stack, file, queue, worker.pid, runs));
  await worker.stop();

  const stagesPerS = round(median(samples.map((s) => s.stagesPerS)));
  const peakRssMb = Math.max(...samples.map((s) => s.peakRssMb));
  const failed = samples.reduce((sum, s) => sum + s.failedRuns, 0);
  const stages = runs * STAGES;
  const cpuPerStage = (key: keyof Sample['cpuMs']): number => round(median(samples.map((s) => s.cpuMs[key] / stages)), 2);
  const busyCores = median(samples.map((s) => (s.cpuMs.worker + s.cpuMs.server + s.cpuMs.bench) / s.wallMs));
  return {
    name: 'throughput',
    title: 'Throughput',
    method:
      `${runs} runs of a 3-stage linear anthropic-api pipeline started at once (Promise.all of client starts) against one worker process ` +
      '(default settings); zero model latency. ' +
      `Stages per second = ${runs * STAGES} / (first start → last result). Peak RSS = the worker's VmHWM, reset before the burst. ${bursts} bursts after a warm-up.`,
    repetitions: bursts,
    headline: `${stagesPerS} stages/s, worker peak RSS ${peakRssMb} MB`,
    goal: { text: 'report', met: null },
    figures: {
      stagesPerS,
      peakRssMb,
      idleRssMb: round(median(samples.map((s) => s.idleRssMb))),
      burstWallMs: samples.map((s) => round(s.wallMs)),
      runsPerBurst: runs,
      failedRuns: failed,
      modelRequestsPerBurst: samples.map((s) => s.modelRequests),
      cpuMsPerStage: { worker: cpuPerStage('worker'), server: cpuPerStage('server'), bench: cpuPerStage('bench') },
    },
    notes: [
      `CPU per stage (p50 burst): worker ${cpuPerStage('worker')} ms, Temporal dev server ${cpuPerStage('server')} ms, bench process (client and model server) ${cpuPerStage('bench')} ms; ` +
        `together ${round(busyCores, 2)} of the ${cpus().length} cores busy during the burst${busyCores > cpus().length * 0.8 ? ', so the machine\'s CPU is the limit' : ''}.`,
      failed > 0 ? `${failed} runs failed; see the worker log in the scratch folder.` : `All ${runs * bursts} runs completed.`,
      'The dev server, the worker, the client and the model server share the two cores, so this is a floor for a real deployment.',
    ],
    durationS: 0,
  };
}
