import { getStatusQuery } from '../../src/contracts/messages.js';
import { readCapturedCalls, writeClaudeWrapper, type CapturedCall } from '../lib/claude-capture.js';
import { INSTANT_REPORT_SCENARIO, linearPipeline } from '../lib/fixtures.js';
import { readTimeline } from '../lib/history.js';
import type { BenchmarkResult } from '../lib/results.js';
import { CLAUDE_BINARY, type BenchStack } from '../lib/stack.js';
import { median, percentile, round } from '../lib/stats.js';

/** What the latency runs leave for the overhead benchmark: the claude calls of one run, to replay. */
export interface StageLatencyOutcome {
  result: BenchmarkResult;
  calls: CapturedCall[];
}

export const LATENCY_STAGES = 5;

interface StageSample {
  /** Scheduled → completed minus the agent process's life. */
  overheadMs: number;
  queueMs: number;
  beforeSpawnMs: number;
  afterExitMs: number;
  agentMs: number;
  /** The CLI's own `duration_ms`, as the stage result carries it. */
  reportedDurationMs: number;
}

/**
 * Runs the 5-stage linear CLI pipeline `runs` times (after one warm-up run) with a recording wrapper as
 * CLAUDE_BIN, and splits each stage's scheduled → completed time (history events) into the agent process's
 * life (measured by the wrapper around the real binary) and everything else.
 */
export async function benchStageLatency(stack: BenchStack, runs: number): Promise<StageLatencyOutcome> {
  const captureDir = await stack.folder('capture');
  const wrapper = await writeClaudeWrapper(captureDir, CLAUDE_BINARY);
  const queue = stack.uniqueName('latency');
  // Warm start off: each stage's claude is spawned when the stage starts, so start→spawn is measured as it was, and the
  // recorded calls (replayed by the overhead baseline) are the pipeline's plain cold calls.
  const worker = await stack.startWorker(queue, await stack.folder('workspaces'), { CLAUDE_BIN: wrapper, AGENT_PIPELINE_PREWARM: 'off' });
  stack.useScenario(INSTANT_REPORT_SCENARIO);
  const file = await stack.writePipeline(linearPipeline({ name: 'bench-latency', stages: LATENCY_STAGES }));

  const samples: StageSample[] = [];
  const gapsMs: number[] = [];
  const workflowTaskMs: number[] = [];
  const eventsPerStage: number[] = [];
  let replayCalls: CapturedCall[] = [];
  let seen = 0;
  for (let run = 0; run <= runs; run += 1) {
    const handle = await stack.startPipeline(file, queue);
    await stack.expectCompleted(handle);
    const all = await readCapturedCalls(captureDir);
    const calls = all.slice(seen);
    seen = all.length;
    if (run === 0) continue; // warm-up: first connections, first JIT
    if (replayCalls.length === 0) replayCalls = calls;
    const timeline = await readTimeline(handle);
    const state = await handle.query(getStatusQuery);
    if (calls.length !== timeline.activities.length) {
      throw new Error(`run ${handle.workflowId}: ${timeline.activities.length} stages but ${calls.length} claude calls were recorded`);
    }
    timeline.activities.forEach((activity, i) => {
      const call = calls[i];
      const agentMs = call.agentExitedAt - call.wrapperStartedAt;
      const closedAt = activity.closedAt ?? Number.NaN;
      const startedAt = activity.startedAt ?? Number.NaN;
      samples.push({
        overheadMs: closedAt - activity.scheduledAt - agentMs,
        queueMs: startedAt - activity.scheduledAt,
        beforeSpawnMs: call.wrapperStartedAt - startedAt,
        afterExitMs: closedAt - call.agentExitedAt,
        agentMs,
        reportedDurationMs: state.stages.find((s) => s.id === activity.stageId)?.result?.durationMs ?? Number.NaN,
      });
      const next = timeline.activities[i + 1];
      if (next) gapsMs.push(next.scheduledAt - closedAt);
    });
    workflowTaskMs.push(...timeline.workflowTaskMs);
    eventsPerStage.push(timeline.eventCount / timeline.activities.length);
  }
  await worker.stop();

  const pick = (key: keyof StageSample): number[] => samples.map((s) => s[key]);
  const p50 = round(percentile(pick('overheadMs'), 50));
  const p95 = round(percentile(pick('overheadMs'), 95));
  return {
    calls: replayCalls,
    result: {
      name: 'stage-latency',
      title: 'Stage latency',
      method:
        `The 5-stage linear CLI pipeline, ${runs} runs after a warm-up (${samples.length} stages). Per stage: ActivityTaskScheduled → ActivityTaskCompleted ` +
        '(history event times) minus the agent process\'s own life, timed by a bash CLAUDE_BIN wrapper around the real binary ($EPOCHREALTIME at wrapper start and after the binary exits). ' +
        'The result\'s durationMs is the CLI\'s own duration_ms, which leaves out the CLI\'s start-up (about half a second), so it cannot serve as the process time.',
      repetitions: samples.length,
      headline: `p50 ${p50} ms, p95 ${p95} ms`,
      goal: { text: 'p50 ≤ 50 ms', met: p50 <= 50 },
      figures: {
        p50Ms: p50,
        p95Ms: p95,
        stages: samples.length,
        breakdownP50Ms: {
          scheduledToStarted: round(median(pick('queueMs'))),
          startedToSpawn: round(median(pick('beforeSpawnMs'))),
          exitToCompleted: round(median(pick('afterExitMs'))),
        },
        agentProcessP50Ms: round(median(pick('agentMs'))),
        cliReportedDurationP50Ms: round(median(pick('reportedDurationMs'))),
        betweenStagesP50Ms: round(median(gapsMs)),
        workflowTaskP50Ms: round(median(workflowTaskMs)),
        historyEventsPerStage: round(median(eventsPerStage)),
      },
      notes: [
        `Where the time goes (p50): scheduled → a worker starts the task ${round(median(pick('queueMs')))} ms; task start → agent spawned ${round(median(pick('beforeSpawnMs')))} ms ` +
          `(all the activity does before the agent runs: workspace, prompt, bookkeeping, the spawn); agent exit → completed ${round(median(pick('afterExitMs')))} ms ` +
          '(clean-up, artifacts, the output contract, the completion RPC).',
        `Between stages (completed → next scheduled, one workflow task): p50 ${round(median(gapsMs))} ms; not part of a stage's latency, but part of the overhead ratio.`,
        'The wrapper\'s own bash start (a millisecond or two) counts as overhead here, so the figure errs high.',
      ],
      durationS: 0,
    },
  };
}
