import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { PipelineClient } from '../../src/library/pipeline-client.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import type { BenchmarkResult } from '../lib/results.js';
import type { BenchStack } from '../lib/stack.js';
import { median, round } from '../lib/stats.js';
import { reportText } from '../lib/fixtures.js';

/** Stages of the pipeline; the fork runs the last {@link RUN_AGAIN} again. */
const STAGES = 6;
const RUN_AGAIN = 3;
/** What a model turn costs the scripted server in time, as a real model's would (far less than a real one). @unit milliseconds */
const TURN_MS = 400;

/** Each stage records a step with a Bash call, then reports: two model turns (the turn index picks the answer). */
const SCENARIO: ScenarioInput = {
  rules: Array.from({ length: STAGES }, (_, i) => ({
    name: `s${i + 1}`,
    match: `Stage: s${i + 1} ·`,
    turns: [
      { text: 'Working.', delayMs: TURN_MS, tool: { name: 'Bash', input: { command: 'date +%s%N >> work.log', description: 'Record the step' } } },
      { text: reportText(`s${i + 1} done`), delayMs: TURN_MS },
    ],
  })),
};

/** The time from start to end of a run, and the model requests it made. */
interface Timed {
  seconds: number;
  requests: number;
  costUsd: number;
}

/**
 * Forking against starting again, as a person tuning stage 4 of 6 would: a 6-stage CLI run (the real `claude`, two
 * scripted model turns of 400 ms a stage) completes; stage 4's step file is edited; then once `fork --from s4` and once
 * a fresh start of the edited pipeline (what a user does without forks). Also: the cost of the fork points every run
 * pays (each stage's first-start checkpoint, the default), as a stage's time with and without them.
 */
export async function benchFork(stack: BenchStack, repetitions: number): Promise<BenchmarkResult> {
  const queue = stack.uniqueName('fork');
  const worker = await stack.startWorker(queue, await stack.folder('workspaces'));
  const plain = stack.uniqueName('fork-off');
  const withoutForkPoints = await stack.startWorker(plain, await stack.folder('workspaces'), { AGENT_PIPELINE_CHECKPOINTS: 'off' });
  const client = await PipelineClient.connect({ address: stack.devServer.address, taskQueue: queue, env: {} });
  stack.useScenario(SCENARIO);
  const fork: Timed[] = [];
  const again: Timed[] = [];
  const stageSeconds = { on: [] as number[], off: [] as number[] };
  try {
    for (let r = 0; r < repetitions; r++) {
      const file = await writePipeline(stack, `bench-fork-${r}`);
      const source = await timed(stack, () => client.start(file));
      stageSeconds.on.push(source.seconds / STAGES);
      await writeFile(path.join(path.dirname(file), 'steps', 's4.md'), 'Record the step, then check the log twice.\n');
      fork.push(await timed(stack, async () => client.fork(source.runId, { from: `s${STAGES - RUN_AGAIN + 1}` })));
      again.push(await timed(stack, () => client.start(file)));
      const off = await timed(stack, () => client.start(file, { taskQueue: plain }));
      stageSeconds.off.push(off.seconds / STAGES);
    }
  } finally {
    await client.close();
    await Promise.all([worker.stop(), withoutForkPoints.stop()]);
  }
  const forkS = median(fork.map((t) => t.seconds));
  const againS = median(again.map((t) => t.seconds));
  const pointMs = round((median(stageSeconds.on) - median(stageSeconds.off)) * 1000);
  const expectedRequests = RUN_AGAIN * 2;
  return {
    name: 'fork',
    title: 'Fork',
    method:
      `A ${STAGES}-stage linear CLI pipeline (the real claude, sandbox auto, two scripted model turns of ${TURN_MS} ms a stage, a Bash call in between) completes; ` +
      `stage s4's step file is edited; then \`fork --from s4\` (client.fork) and, as a user without forks would, a fresh start of the edited pipeline. Each timed ` +
      'from the start call to the run\'s end. Fork points: the same fresh start on a worker with AGENT_PIPELINE_CHECKPOINTS=off, per stage, against the default.',
    repetitions,
    headline: `fork ${round(forkS, 1)} s and ${median(fork.map((t) => t.requests))} model requests vs start again ${round(againS, 1)} s and ${median(again.map((t) => t.requests))}; fork points cost ${pointMs} ms a stage`,
    goal: {
      text: `the fork asks the model only for the ${RUN_AGAIN} stages it runs again (${expectedRequests} requests) and takes less time than starting again`,
      met: fork.every((t) => t.requests === expectedRequests) && forkS < againS,
    },
    figures: {
      forkSeconds: fork.map((t) => round(t.seconds, 2)),
      startAgainSeconds: again.map((t) => round(t.seconds, 2)),
      forkRequests: fork.map((t) => t.requests),
      startAgainRequests: again.map((t) => t.requests),
      forkCostUsd: round(median(fork.map((t) => t.costUsd)), 5),
      startAgainCostUsd: round(median(again.map((t) => t.costUsd)), 5),
      stageSecondsWithForkPoints: round(median(stageSeconds.on), 3),
      stageSecondsWithoutForkPoints: round(median(stageSeconds.off), 3),
      forkPointMsPerStage: pointMs,
    },
    notes: [
      'A real model\'s turns take seconds, not 400 ms: the fork\'s saving in time grows with them, and in money it is the cost of the stages taken over (`carriedCostUsd`).',
      'The fork point of a stage is a checkpoint of its run folder, taken before the agent starts; a git workspace\'s is a commit built with a temporary index and a bundle of what changed.',
    ],
    durationS: 0,
  };
}

/** The pipeline, its step files in `steps/`. */
async function writePipeline(stack: BenchStack, name: string): Promise<string> {
  const stages = Array.from({ length: STAGES }, (_, i) => ({
    id: `s${i + 1}`,
    prompt: `steps/s${i + 1}.md`,
    ...(i > 0 ? { needs: [`s${i}`] } : {}),
  }));
  const file = await stack.writePipeline({ name, defaults: { backend: 'claude-cli', model: 'sonnet', retries: 0, permissionMode: 'dontAsk', allowedTools: ['Bash'] }, stages });
  await mkdir(path.join(path.dirname(file), 'steps'), { recursive: true });
  for (const stage of stages) await writeFile(path.join(path.dirname(file), 'steps', `${stage.id}.md`), `Record the step of ${stage.id}.\n`);
  return file;
}

/** Runs `start` to the run's end; its time, the model requests made meanwhile and its cost. */
async function timed(stack: BenchStack, start: () => Promise<{ id: string; result(): Promise<RunState> }>): Promise<Timed & { runId: string }> {
  const before = stack.modelServer.requests().filter((r) => r.path === '/v1/messages').length;
  const startedAt = performance.now();
  const handle = await start();
  const state = await handle.result();
  const seconds = (performance.now() - startedAt) / 1000;
  const requests = stack.modelServer.requests().filter((r) => r.path === '/v1/messages').length - before;
  return { runId: handle.id, seconds, requests, costUsd: state.costUsd };
}
