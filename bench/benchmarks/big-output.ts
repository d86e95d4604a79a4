import { INSTANT_REPORT_SCENARIO, linearPipeline, reportText } from '../lib/fixtures.js';
import { isAgentProcess, PeakSampler, processTree, readMemory, resetPeakRss } from '../lib/proc.js';
import type { BenchmarkResult } from '../lib/results.js';
import type { BenchStack } from '../lib/stack.js';
import { elapsedMs, kbToMb, round } from '../lib/stats.js';

const MARKER = 'bench-big-output';
const GOAL_MB = 50;
/** One repeated unit of the answer: filler lines, then a valid report, so the whole answer still ends with one. */
const UNIT = `${`${'x'.repeat(99)}\n`.repeat(640)}${reportText('Streamed a very long answer.')}\n`;

/**
 * One CLI stage whose agent streams `megabytes` MB of answer text (scenario `text` × `repeat`), on a warmed-up
 * worker process: the worker's RSS growth is its peak (VmHWM, reset just before, plus 100 ms samples) minus
 * its resident size just before the run.
 */
export async function benchBigOutput(stack: BenchStack, megabytes: number): Promise<BenchmarkResult> {
  const queue = stack.uniqueName('big-output');
  const worker = await stack.startWorker(queue, await stack.folder('workspaces'));
  const repeat = Math.ceil((megabytes * 1024 * 1024) / UNIT.length);
  const streamedMb = round((repeat * UNIT.length) / 2 ** 20);

  stack.useScenario(INSTANT_REPORT_SCENARIO);
  await stack.expectCompleted(await stack.startPipeline(await stack.writePipeline(linearPipeline({ name: 'bench-warm-up', stages: 1 })), queue));
  stack.useScenario({ rules: [{ name: 'big', match: MARKER, turns: [{ text: UNIT, repeat }] }] });
  const file = await stack.writePipeline(linearPipeline({ name: 'bench-big-output', stages: 1, prompt: () => `${MARKER}: write a very long answer.`, defaults: { timeout: '15m' } }));

  const before = readMemory(worker.pid)!;
  resetPeakRss(worker.pid);
  let agentPeakKb = 0;
  const sampler = new PeakSampler(() => {
    for (const pid of processTree(worker.pid).filter(isAgentProcess)) agentPeakKb = Math.max(agentPeakKb, readMemory(pid)?.rssKb ?? 0);
    return readMemory(worker.pid)?.rssKb ?? 0;
  }, 100);
  const startNs = process.hrtime.bigint();
  const handle = await stack.startPipeline(file, queue);
  const completed = await stack.finish(handle);
  const wallMs = elapsedMs(startNs);
  const sampled = sampler.stop();
  const after = readMemory(worker.pid)!;
  await worker.stop();

  const peakKb = Math.max(after.hwmKb, sampled.peak);
  const growthMb = kbToMb(peakKb - before.rssKb);
  return {
    name: 'big-output',
    title: 'Big output',
    method:
      `One CLI stage whose scripted answer is ${streamedMb} MB of text (\`text\` × \`repeat\`, 64 KiB chunks), on a worker process warmed up by one small run. ` +
      'Growth = the worker\'s VmHWM during the run (reset just before; also sampled every 100 ms) minus its VmRSS just before. One run: it is slow and its figure is not noisy.',
    repetitions: 1,
    headline: `worker RSS +${growthMb} MB for ${streamedMb} MB streamed (${completed ? 'stage completed' : 'run failed'}, ${round(wallMs / 1000)} s)`,
    goal: { text: `worker RSS growth ≤ ${GOAL_MB} MB`, met: growthMb <= GOAL_MB },
    figures: {
      rssGrowthMb: growthMb,
      workerRssBeforeMb: kbToMb(before.rssKb),
      workerPeakRssMb: kbToMb(peakKb),
      workerRssAfterMb: kbToMb(after.rssKb),
      agentPeakRssMb: kbToMb(agentPeakKb),
      streamedMb,
      wallMs: round(wallMs),
      completed,
    },
    notes: [
      'The CLI repeats the whole answer in its final `assistant` and `result` lines, however it streams the deltas, so the worker has to read ' +
        `stdout lines of about ${streamedMb} MB without holding them. The agent process's own peak RSS is shown for context: it is not the worker's to bound.`,
    ],
    durationS: 0,
  };
}
