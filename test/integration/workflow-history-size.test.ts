import type { WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { StageAttemptInput } from '../../src/contracts/stage-attempt.js';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, summarize } from './workflow-helpers.js';

/*
 * Issue 20, linear history: a stage's activity input carries the results of the stages it needs and the run's inputs
 * only when they are small; what else its templates read (an ancestor further up, a big input, any stage for a
 * `finally` stage) the activity reads from the run with a query. The prompt is the same as when every value travelled
 * with every stage; the history holds each value once, so its size per stage stays flat as runs grow.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const answer = (summary: string, outputs: Record<string, unknown> = {}): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs })}\n\`\`\``;
/** About what the issue measured: a ~0.9 KB summary and ~1.8 KB of outputs per stage. */
const BULKY = answer(`Did the work. ${'Details of the work. '.repeat(45)}`, { notes: 'Notes on the work. '.repeat(95) });

const RULES: Rule[] = [
  { name: 'a', match: 'Pipeline: refs · Stage: a ·', turns: [{ text: answer('Wrote the outline.', { title: 'TITLE-FROM-STAGE-A' }) }] },
  { name: 'b', match: 'Pipeline: refs · Stage: b ·', turns: [{ text: answer('SUMMARY-OF-STAGE-B') }] },
  { name: 'c', match: 'Pipeline: refs · Stage: c ·', turns: [{ text: answer('Used both.') }] },
  { name: 'wrap', match: 'Pipeline: refs · Stage: wrap ·', turns: [{ text: answer('Wrapped up.') }] },
];

const REFS_PIPELINE = [
  'name: refs',
  'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }',
  'inputs:',
  '  doc: { description: a long document }',
  '  topic: { default: "kites" }',
  'stages:',
  '  - { id: a, prompt: "Outline {{inputs.topic}}." }',
  '  - { id: b, needs: [a], prompt: "Review the outline." }',
  '  - id: c',
  '    needs: [b]',
  '    prompt: "Title: {{stages.a.outputs.title}}. After: {{stages.b.summary}}. Document: {{inputs.doc}}"',
  'finally:',
  '  - { id: wrap, prompt: "Close {{stages.a.outputs.title}} ({{run.status}})." }',
].join('\n');

/** A 100 KB input, recognisable at both ends. */
const BIG_DOC = `DOC-START ${'lorem ipsum '.repeat(8_500)} DOC-END`;

function linearPipeline(name: string, stages: number): string {
  const lines = [`name: ${name}`, 'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }', 'stages:'];
  for (let i = 1; i <= stages; i++) lines.push(`  - { id: s${i}, prompt: "Step ${i}."${i > 1 ? `, needs: [s${i - 1}]` : ''} }`);
  return lines.join('\n');
}

/** The inputs of the run's `runStage` activities, as the history recorded them, with their encoded size. */
async function scheduledStageInputs(handle: WorkflowHandle): Promise<{ input: StageAttemptInput; bytes: number }[]> {
  const history = await handle.fetchHistory();
  return (history.events ?? []).flatMap((event) => {
    const scheduled = event.activityTaskScheduledEventAttributes;
    const payload = scheduled?.input?.payloads?.[0];
    if (scheduled?.activityType?.name !== 'runStage' || !payload) return [];
    return [{ input: defaultPayloadConverter.fromPayload<StageAttemptInput>(payload), bytes: payload.data?.byteLength ?? 0 }];
  });
}

describe('template values by reference', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('history-size', { scenario: { rules: RULES, fallback: { text: BULKY } } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  test('a stage reads an ancestor it does not need directly and a big input; neither is in its activity input', { timeout: 120_000 }, async () => {
    const handle = await harness.start(await harness.writePipeline('refs', REFS_PIPELINE), { doc: BIG_DOC });
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status, JSON.stringify(summarize(state))).toBe('completed');

    const prompts = harness.modelServer
      .requests()
      .filter((r) => r.path === '/v1/messages')
      .map((r) => JSON.stringify(r.body));
    const promptOf = (stage: string): string => {
      const found = prompts.filter((p) => p.includes(`Pipeline: refs · Stage: ${stage} ·`));
      expect(found, `requests of stage ${stage}`).toHaveLength(1);
      return found[0];
    };
    // Rendered as before: the grandparent's output, the parent's summary and the whole 100 KB input.
    const c = promptOf('c');
    expect(c).toContain('Title: TITLE-FROM-STAGE-A. After: SUMMARY-OF-STAGE-B. Document: DOC-START lorem ipsum');
    expect(c).toContain(JSON.stringify(BIG_DOC).slice(1, -1));
    // A finally stage may read any stage; it needs none.
    expect(promptOf('wrap')).toContain('Close TITLE-FROM-STAGE-A (completed).');

    // Nor is it repeated in the run's summary (the Web UI's one line), which the start event stores beside the input.
    const started = (await handle.fetchHistory()).events?.[0];
    expect(started?.userMetadata?.summary?.data?.byteLength).toBeLessThan(1_000);
    const scheduled = await scheduledStageInputs(handle);
    expect(scheduled.map((s) => s.input.stage.id)).toEqual(['a', 'b', 'c', 'wrap']);
    for (const { input, bytes } of scheduled) {
      // The 100 KB input is in the history once, in the start event, not in any stage's input.
      expect(bytes, `runStage input of ${input.stage.id}`).toBeLessThan(8_000);
      expect(input.inputs).toEqual({});
      expect(input.withheld?.inputs).toBe(true);
    }
    const byStage = Object.fromEntries(scheduled.map((s) => [s.input.stage.id, s.input]));
    expect(Object.keys(byStage.c.priorStages)).toEqual(['b']);
    expect(byStage.c.withheld?.stages).toBe(true);
    expect(Object.keys(byStage.wrap.priorStages)).toEqual([]);
    expect(JSON.stringify(byStage.c)).not.toContain('TITLE-FROM-STAGE-A');
  });

  test('history bytes per stage stay flat from 20 to 60 linear stages', { timeout: 600_000 }, async () => {
    const perStage: Record<number, number> = {};
    // The two runs at once, on one worker and one task queue (which each history names as often per stage).
    const runLinear = async (stages: number): Promise<void> => {
      const handle = await harness.start(await harness.writePipeline(`linear${stages}`, linearPipeline(`linear${stages}`, stages)));
      const state = await harness.finish(handle);
      expect(state.status, JSON.stringify(summarize(state))).toBe('completed');
      const bytes = Number((await handle.describe()).historySize);
      expect(bytes).toBeGreaterThan(0);
      perStage[stages] = bytes / stages;
      // No stage's input grows with the run: the last carries one earlier result, like the second.
      const inputs = await scheduledStageInputs(handle);
      expect(Math.max(...inputs.map((s) => s.bytes))).toBeLessThan(6_000);
    };
    await Promise.all([runLinear(20), runLinear(60)]);
    // Before, each stage's input carried every earlier result: 60 stages cost about 2.5 times as much per stage as 20.
    expect(perStage[60] / perStage[20], JSON.stringify(perStage)).toBeLessThan(1.2);
    expect(perStage[60] / perStage[20]).toBeGreaterThan(0.8);
  });
});
