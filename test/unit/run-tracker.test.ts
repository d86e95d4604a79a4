import { describe, expect, test, vi } from 'vitest';
import { formatDuration } from '../../src/pipeline/duration.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import type { StageResult } from '../../src/pipeline/stage-result.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';
import { renderRunReport, StageRows } from '../../src/workflows/run-report.js';
import { RunTracker } from '../../src/workflows/run-tracker.js';

const pipeline = parsePipeline(
  ['name: p', 'stages:', '  - { id: a, prompt: x }', '  - { id: b, prompt: x, needs: [a] }', '  - { id: c, prompt: x, needs: [a] }', '  - { id: d, prompt: x }'].join('\n'),
  'p.yaml',
);
const stages = pipeline.stages.map((s) => resolveStage(pipeline, s));
const result = (summary: string, outputs: Record<string, unknown> = {}): StageResult => ({
  status: 'completed', summary, outputs, artifacts: [{ path: 'out.md', bytes: 3, sha256: 'abc' }], usage: { inputTokens: 10, outputTokens: 5 },
  costUsd: 0.25, numTurns: 1, durationMs: 1000, warnings: [], workspace: '/ws/run-1', attempt: 1,
});

describe('RunTracker', () => {
  test('tracks stage states, what satisfies dependents, costs and the run status', () => {
    const tracker = new RunTracker('run-1', 'p', { topic: 'x' }, stages, 1);
    tracker.markRunning('a', 1);
    tracker.recordCost('a', { usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 7, cacheWriteTokens: 3 }, costUsd: 0.25, attempts: 2, durationMs: 1500 });
    tracker.markCompleted('a', result('did a', { passed: false }));
    tracker.markRunning('b', 1);
    tracker.markWaiting('b', { kind: 'answer', message: 'b asks', question: 'Which one?', commands: ['agent-pipeline answer run-1 --stage b "..."'], since: 0 });
    tracker.markSkipped('c', 'condition is false', true);
    tracker.markSkipped('d', 'it needs x, which failed', false);

    expect(tracker.state.status).toBe('blocked');
    expect(tracker.currentStageIds()).toEqual(['b']);
    expect([tracker.isSatisfied('a'), tracker.isSatisfied('b'), tracker.isSatisfied('c'), tracker.isSatisfied('d')]).toEqual([true, false, true, false]);
    expect(tracker.stage('a').totals).toEqual({ inputTokens: 10, outputTokens: 5, cacheReadTokens: 7, cacheWriteTokens: 3, costUsd: 0.25, attempts: 2, durationMs: 1500 });
    expect(tracker.state).toMatchObject({ costUsd: 0.25, budgetUsd: 1, workspace: '/ws/run-1' });
    expect(tracker.templateStages()).toEqual({ a: { summary: 'did a', outputs: { passed: false }, artifacts: ['out.md'], status: 'completed', error: '' } });
    expect(tracker.conditionContext().stages).toEqual({
      a: { status: 'completed', summary: 'did a', outputs: { passed: false } },
      c: { status: 'skipped' },
      d: { status: 'skipped' },
    });

    tracker.markResumed('b');
    expect(tracker.state.status).toBe('running');
    tracker.markPendingAgain('a');
    expect(tracker.isStarted('a')).toBe(false);
    expect(tracker.stage('a').result?.summary).toBe('did a');
    expect(tracker.finish('failed', { type: 'X', message: 'boom' })).toMatchObject({ status: 'failed', error: { type: 'X' } });
  });

  test('renders a readable report with what the run waits for and the commands that move it on', () => {
    const tracker = new RunTracker('run-1', 'p', {}, stages, 1);
    tracker.markRunning('a', 2);
    tracker.recordCost('a', { costUsd: 0.5, attempts: 1, durationMs: 10 });
    tracker.markCompleted('a', result('did a'));
    tracker.markRunning('b', 1);
    tracker.markWaiting('b', { kind: 'permission', message: 'calls to Bash were denied', denials: [{ tool: 'Bash', input: { command: 'rm -rf /' } }], commands: ['agent-pipeline approve run-1 --stage b --allow Bash'], since: 0 });
    const report = renderRunReport(tracker.state, Date.now());
    expect(report).toContain('**p** · waiting · cost $0.5000 of $1.0000 budget');
    expect(report).toContain('**Waiting** · stage `b` · calls to Bash were denied');
    expect(report).toContain('- denied: `Bash` {"command":"rm -rf /"}');
    expect(report).toContain('- `agent-pipeline approve run-1 --stage b --allow Bash`');
    expect(report).toMatch(/\| a \| completed \| 2 \| 1 \| [^|]+ \| \$0\.5000 \|/);
    expect(report).toContain('| b | waiting (permission) | 1 |');
  });
});

describe('the work of one activation does not grow with the run', () => {
  /** A tracker of `count` stages whose list counts every read of one of its stages. */
  function countingTracker(count: number): { tracker: RunTracker; reads: () => number } {
    const many = parsePipeline(['name: p', 'stages:', ...Array.from({ length: count }, (_, i) => `  - { id: s${i}, prompt: x }`)].join('\n'), 'p.yaml');
    const tracker = new RunTracker('run-1', 'p', {}, many.stages.map((s) => resolveStage(many, s)));
    let reads = 0;
    const list = tracker.state.stages;
    tracker.state.stages = new Proxy(list, {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) reads += 1;
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    return { tracker, reads: () => reads };
  }

  test("keeps a stage's first start once it starts again (a rework), so a fork from it plans from then", () => {
    vi.useFakeTimers({ now: 1_000 });
    try {
      const tracker = new RunTracker('run-1', 'p', {}, stages, 1);
      tracker.markRunning('a', 1);
      expect(tracker.state.stages[0].firstStartedAt).toBeUndefined();
      tracker.markCompleted('a', result('did a'));
      vi.setSystemTime(2_000);
      tracker.markRunning('a', 2);
      vi.setSystemTime(3_000);
      tracker.markRunning('a', 3);
      expect(tracker.state.stages[0]).toMatchObject({ firstStartedAt: 1_000, startedAt: 3_000 });
    } finally {
      vi.useRealTimers();
    }
  });

  test('a stage is found by its id without searching the list', () => {
    const { tracker, reads } = countingTracker(1_000);
    tracker.stage('s999');
    const first = reads();
    for (let i = 0; i < 1_000; i++) tracker.isStarted('s999');
    // Building the index reads the list once; a search per lookup would read it a million times.
    expect(reads() - first).toBe(0);
    expect(first).toBeLessThanOrEqual(1_000);
  });

  test('a stage added to the list later is found too', () => {
    const { tracker } = countingTracker(3);
    tracker.stage('s0');
    tracker.state.stages.push({ id: 'delivery', status: 'pending', backend: 'git', model: 'origin' });
    expect(tracker.hasStage('delivery')).toBe(true);
    expect(tracker.stage('delivery').backend).toBe('git');
    expect(() => tracker.stage('nope')).toThrow('unknown stage nope');
  });

  test('the report, whose rows are kept between renders, is the report rendered afresh as the run changes', () => {
    const { tracker } = countingTracker(200);
    for (let i = 0; i < 199; i++) {
      tracker.markRunning(`s${i}`, 1);
      tracker.markCompleted(`s${i}`, result(`did ${i}`));
    }
    tracker.markRunning('s199', 1);
    const rows = new StageRows(() => tracker.takeReportChanged());
    const startedAt = tracker.stage('s199').startedAt!;
    expect(renderRunReport(tracker.state, startedAt + 1_000, rows)).toBe(renderRunReport(tracker.state, startedAt + 1_000));
    // A finished stage that changes, and the running stage's elapsed time, show in the next render.
    tracker.markFailed('s3', { type: 'BROKEN', message: 'it broke' });
    tracker.recordCost('s5', { costUsd: 1, attempts: 1, durationMs: 10 });
    const later = renderRunReport(tracker.state, startedAt + 65_000, rows);
    expect(later).toBe(renderRunReport(tracker.state, startedAt + 65_000));
    expect(later).toContain('| s3 | failed: BROKEN |');
    expect(later).toContain(`| s199 | running | 1 |  | ${formatDuration(65_000)} |`);
  });
});
