import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, summarize } from './workflow-helpers.js';

/*
 * Scheduling on the anthropic-api backend (the real SDK against the scripted model server): fast, so each
 * behaviour gets its own small run. Human decisions and the CLI's sessions are in workflow-humans.test.ts.
 */

const report = (summary: string, outputs: Record<string, unknown> = {}, success = true): string =>
  `Done.\n\`\`\`json\n${JSON.stringify({ success, summary, outputs, ...(success ? {} : { error: summary }) })}\n\`\`\``;

/** One rule per stage of pipeline `p`, answering with `text` (optionally slowly, as a stream of chunks). */
function rule(pipeline: string, stage: string, text: string, slowMs = 0): NonNullable<ScenarioInput['rules']>[number] {
  return {
    name: `${pipeline}/${stage}`,
    match: `Pipeline: ${pipeline} · Stage: ${stage} ·`,
    turns: [{ text, ...(slowMs > 0 ? { chunks: 20, chunkDelayMs: Math.round(slowMs / 20) } : {}) }],
  };
}

const HEADER = (name: string, extra = ''): string =>
  `name: ${name}\n${extra}defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500, heartbeatTimeout: 5s }\nstages:\n`;
const STAGE = (id: string, extra = ''): string => `  - id: ${id}\n    prompt: Do ${id}.\n${extra}`;

describe('scheduling stages', () => {
  let harness: Harness;
  const rules: NonNullable<ScenarioInput['rules']> = [
    rule('parallel', 'a', report('a'), 1_500),
    rule('parallel', 'b', report('b'), 1_500),
    rule('parallel', 'c', report('c'), 1_500),
    rule('parallel', 'd', report('d')),
    rule('conditions', 'test', report('two tests failed', { passed: false })),
    rule('conditions', 'fix', report('fixed')),
    rule('conditions', 'celebrate', report('party')),
    rule('conditions', 'ship', report('shipped')),
    rule('failfast', 'broken', report('cannot build', {}, false)),
    rule('failfast', 'slow', report('slow done'), 20_000),
    rule('failfast', 'after', report('never')),
    rule('tolerant', 'flaky', report('flaky broke', {}, false)),
    rule('tolerant', 'uses-flaky', report('never')),
    rule('tolerant', 'solid', report('solid')),
    rule('timeout', 'slow', report('too late'), 20_000),
    // The model sends nothing at all for 30 s (not even its headers): no stream event heartbeats the attempt.
    { name: 'timeout-wait/slow', match: 'Pipeline: timeout-wait · Stage: slow ·', turns: [{ text: report('too late'), delayMs: 30_000 }] },
    { name: 'timeout-cli/slow', match: 'Pipeline: timeout-cli · Stage: slow ·', turns: [{ text: report('too late'), delayMs: 30_000 }] },
  ];

  beforeAll(async () => {
    harness = await createHarness('sched', { scenario: { rules } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  async function run(name: string, yaml: string): Promise<{ handle: WorkflowHandle; state: Awaited<ReturnType<Harness['finish']>>; error?: unknown }> {
    const file = await harness.writePipeline(name, yaml);
    const handle = await harness.start(file);
    const error = await handle.result().then(() => undefined, (err: unknown) => err);
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    return { handle, state, error };
  }

  test('independent stages run in parallel, at most `concurrency` at once', async () => {
    const yaml = HEADER('parallel', 'concurrency: 2\n') + STAGE('a') + STAGE('b') + STAGE('c') + STAGE('d', '    needs: [a, b, c]\n');
    const { handle, state } = await run('parallel', yaml);
    expect(state.status).toBe('completed');
    // Read concurrency from the history, not the clock: scheduled minus closed activities at each event.
    const history = await handle.fetchHistory();
    let open = 0;
    let most = 0;
    const order: string[] = [];
    // The stages' activities only: a run also claims its owner worker first.
    const stages = new Set<string>();
    for (const event of history.events ?? []) {
      if (event.activityTaskScheduledEventAttributes?.activityType?.name === 'runStage') {
        stages.add(String(event.eventId));
        open += 1;
        most = Math.max(most, open);
        order.push(String(event.userMetadata?.summary?.data ? Buffer.from(event.userMetadata.summary.data).toString() : ''));
      }
      const closed = event.activityTaskCompletedEventAttributes ?? event.activityTaskFailedEventAttributes;
      if (closed && stages.has(String(closed.scheduledEventId))) open -= 1;
    }
    expect(most).toBe(2);
    expect(order.map((s) => /stage (\w+)/.exec(s)?.[1])).toEqual(['a', 'b', 'c', 'd']);
    expect(order[0]).toContain('stage a · anthropic-api · haiku');
  });

  test('`when:` conditions on earlier outputs run or skip a stage; a stage skipped by its condition lets dependents run', async () => {
    const yaml =
      HEADER('conditions') +
      STAGE('test') +
      STAGE('fix', '    needs: [test]\n    when: "{{stages.test.outputs.passed}} == false"\n') +
      STAGE('celebrate', '    needs: [test]\n    when: "{{stages.test.outputs.passed}}"\n') +
      STAGE('ship', '    needs: [fix, celebrate]\n');
    const { state } = await run('conditions', yaml);
    expect(summarize(state)).toMatchObject({
      status: 'completed',
      stages: [
        { id: 'test', status: 'completed' },
        { id: 'fix', status: 'completed' },
        { id: 'celebrate', status: 'skipped', skip: 'condition `{{stages.test.outputs.passed}}` is false' },
        { id: 'ship', status: 'completed' },
      ],
    });
  });

  test('a failed stage fails the run and cancels its running siblings', async () => {
    const yaml = HEADER('failfast') + STAGE('broken') + STAGE('slow') + STAGE('after', '    needs: [broken, slow]\n');
    const { state, error } = await run('failfast', yaml);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    const cause = (error as WorkflowFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect((cause as ApplicationFailure).type).toBe('AGENT_REPORTED_FAILURE');
    expect(summarize(state)).toMatchObject({
      status: 'failed',
      error: { type: 'AGENT_REPORTED_FAILURE' },
      stages: [
        { id: 'broken', status: 'failed', error: { type: 'AGENT_REPORTED_FAILURE' } },
        { id: 'slow', status: 'cancelled' },
        { id: 'after', status: 'skipped' },
      ],
    });
  });

  test('with continueOnFailure, the run goes on and only the failed stage’s dependents are skipped', async () => {
    const yaml = HEADER('tolerant') + STAGE('flaky', '    continueOnFailure: true\n') + STAGE('uses-flaky', '    needs: [flaky]\n') + STAGE('solid');
    const { state } = await run('tolerant', yaml);
    expect(summarize(state)).toMatchObject({
      status: 'completed',
      stages: [
        { id: 'flaky', status: 'failed' },
        { id: 'uses-flaky', status: 'skipped', skip: 'it needs flaky, which failed' },
        { id: 'solid', status: 'completed' },
      ],
    });
    expect(state.warnings?.[0]).toContain('stage flaky failed and the run went on (continueOnFailure)');
  });

  test('the pipeline timeout bounds the whole run and stops the running stage', async () => {
    const { state, error } = await run('timeout', HEADER('timeout', 'timeout: 3s\n') + STAGE('slow'));
    expect(((error as WorkflowFailedError).cause as ApplicationFailure).type).toBe('PIPELINE_TIMEOUT');
    expect(summarize(state)).toMatchObject({ status: 'timed_out', error: { type: 'PIPELINE_TIMEOUT' }, stages: [{ id: 'slow', status: 'cancelled' }] });
  });

  test('the pipeline timeout stops a stage waiting on the model before its first byte', async () => {
    // A heartbeat timeout longer than the wait: only the cancellation, reaching the in-flight request, can stop it.
    const yaml = HEADER('timeout-wait', 'timeout: 3s\n').replace('heartbeatTimeout: 5s', 'heartbeatTimeout: 60s') + STAGE('slow');
    const started = Date.now();
    const { state, error } = await run('timeout-wait', yaml);
    expect(((error as WorkflowFailedError).cause as ApplicationFailure).type).toBe('PIPELINE_TIMEOUT');
    expect(summarize(state)).toMatchObject({ status: 'timed_out', error: { type: 'PIPELINE_TIMEOUT' }, stages: [{ id: 'slow', status: 'cancelled' }] });
    // The model would have answered after 30 s.
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  test('the pipeline timeout stops a claude-cli stage whose agent waits on the model, within seconds', async () => {
    // The agent heartbeats while it waits (at least every 5 s, whatever the heartbeatTimeout), so the cancellation
    // reaches it: before, a quiet agent beat only every heartbeatTimeout / 4 (here 15 s).
    const yaml = HEADER('timeout-cli', 'timeout: 3s\n').replace('backend: anthropic-api, model: haiku', 'backend: claude-cli, model: haiku, permissionMode: dontAsk').replace('heartbeatTimeout: 5s', 'heartbeatTimeout: 60s') + STAGE('slow');
    const started = Date.now();
    const { state, error } = await run('timeout-cli', yaml);
    expect(((error as WorkflowFailedError).cause as ApplicationFailure).type).toBe('PIPELINE_TIMEOUT');
    expect(summarize(state)).toMatchObject({ status: 'timed_out', stages: [{ id: 'slow', status: 'cancelled' }] });
    expect(Date.now() - started).toBeLessThan(13_000);
  });
});
