import { describe, expect, test } from 'vitest';
import { stagesReadBy } from '../../src/activities/prompt/template-values.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import type { StageResult } from '../../src/pipeline/stage-result.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';
import { RunTracker } from '../../src/workflows/run-tracker.js';
import { boundCurrentStages, MAX_LISTED_STAGES } from '../../src/workflows/visibility.js';
import { answerTemplateValues, INLINE_INPUTS_MAX_CHARS, INLINE_STAGES_MAX_CHARS, inlineTemplateValues, prewarmHints } from '../../src/workflows/template-values.js';

const pipeline = parsePipeline(
  [
    'name: p',
    'stages:',
    '  - { id: a, prompt: x }',
    '  - { id: b, prompt: x, needs: [a] }',
    '  - { id: side, prompt: x }',
    '  - { id: c, prompt: x, needs: [b] }',
    'finally:',
    '  - { id: wrap, prompt: x }',
  ].join('\n'),
  'p.yaml',
);
const stages = pipeline.stages.map((s) => resolveStage(pipeline, s));
const finallyStages = (pipeline.finally ?? []).map((s) => resolveStage(pipeline, s, true));
const result = (summary: string): StageResult => ({
  status: 'completed', summary, outputs: { key: summary }, artifacts: [{ path: `${summary}.md`, bytes: 3, sha256: 'abc' }],
  usage: { inputTokens: 1, outputTokens: 1 }, costUsd: 0, numTurns: 1, durationMs: 1, warnings: [], workspace: '/ws', attempt: 1,
});

function trackerWith(inputs: Record<string, string>): RunTracker {
  const tracker = new RunTracker('run-1', 'p', inputs, [...stages, ...finallyStages]);
  for (const id of ['a', 'b', 'side']) {
    tracker.markRunning(id, 1);
    tracker.markCompleted(id, result(id));
  }
  return tracker;
}

describe('template values by reference', () => {
  test('an activity input carries the stages it needs, and the inputs only when small', () => {
    const small = inlineTemplateValues(trackerWith({ topic: 'kites' }), { topic: 'kites' }, ['b']);
    expect(Object.keys(small.priorStages)).toEqual(['b']);
    expect(small.inputs).toEqual({ topic: 'kites' });
    expect(small.withheld).toEqual({ stages: true });

    const big = { doc: 'x'.repeat(INLINE_INPUTS_MAX_CHARS) };
    const withBig = inlineTemplateValues(trackerWith(big), big, ['a', 'b', 'side']);
    expect(withBig.inputs).toEqual({});
    // Every completed stage is there: no stage is withheld.
    expect(withBig.withheld).toEqual({ inputs: true });
    expect(inlineTemplateValues(trackerWith({}), {}, ['a', 'b', 'side']).withheld).toBeUndefined();
  });

  test('a join after a wide fan-out is sent the results it needs up to a size, and reads the rest', () => {
    const wide = parsePipeline(['name: w', 'stages:', ...Array.from({ length: 60 }, (_, i) => `  - { id: f${i}, prompt: x }`), '  - { id: join, prompt: x }'].join('\n'), 'w.yaml');
    const tracker = new RunTracker('run-1', 'w', {}, wide.stages.map((s) => resolveStage(wide, s)));
    const ids = wide.stages.slice(0, 60).map((s) => s.id);
    for (const id of ids) {
      tracker.markRunning(id, 1);
      tracker.markCompleted(id, result(`${id} ${'done. '.repeat(400)}`));
    }
    const values = inlineTemplateValues(tracker, {}, ids);
    const sent = Object.keys(values.priorStages);
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.length).toBeLessThan(60);
    expect(JSON.stringify(values.priorStages).length).toBeLessThanOrEqual(INLINE_STAGES_MAX_CHARS + 100);
    expect(values.withheld).toEqual({ stages: true });
  });

  test('the query answers a stage with the stages it runs after only; a finally stage and the delivery with any', () => {
    const tracker = trackerWith({ doc: 'long' });
    const forC = answerTemplateValues(tracker, stages, { stage: 'c', stages: ['a', 'side', 'c', 'nope'] });
    // `side` completed, but c does not run after it: unknown to c's templates, as `validate` says.
    expect(Object.keys(forC.stages)).toEqual(['a']);
    expect(forC.stages.a).toEqual({ summary: 'a', outputs: { key: 'a' }, artifacts: ['a.md'], status: 'completed', error: '' });
    expect(forC.inputs).toBeUndefined();
    const forWrap = answerTemplateValues(tracker, stages, { stage: 'wrap', stages: ['a', 'side'], inputs: true });
    expect(Object.keys(forWrap.stages)).toEqual(['a', 'side']);
    expect(forWrap.inputs).toEqual({ doc: 'long' });
  });

  test('the stages templates read are found outside raw spans', () => {
    expect(stagesReadBy(['{{stages.a.summary}} {{ stages.b.outputs.x }} {{inputs.q}}', undefined, '{{raw}}{{stages.c.summary}}{{/raw}} {{stages.a.artifacts}}'])).toEqual(['a', 'b']);
  });
});

describe('the current stages search attribute', () => {
  test('lists the first 20 current stages, within Temporal\'s size limit, however wide the fan-out', () => {
    const ids = Array.from({ length: 500 }, (_, i) => `fan-out-part-${i}`);
    expect(boundCurrentStages(ids)).toEqual(ids.slice(0, MAX_LISTED_STAGES));
    const long = Array.from({ length: 20 }, (_, i) => `${'a-very-long-stage-id-'.repeat(6)}${i}`);
    const listed = boundCurrentStages(long);
    expect(listed.length).toBeLessThan(20);
    expect(Buffer.byteLength(JSON.stringify(listed))).toBeLessThan(2_048);
    expect(boundCurrentStages(['a', 'b'])).toEqual(['a', 'b']);
  });
});

describe('warm start hints', () => {
  test('only stages whose agents can start early, at most 16', () => {
    const wide = parsePipeline(
      ['name: w', 'defaults: { backend: claude-cli }', 'stages:', '  - { id: api, prompt: x, backend: anthropic-api }', '  - { id: chosen, agent: agents/x.md, backend: anthropic-api }', ...Array.from({ length: 30 }, (_, i) => `  - { id: cli${i}, prompt: x }`)].join('\n'),
      'w.yaml',
    );
    const resolved = wide.stages.map((s) => resolveStage(wide, s));
    const [api, , cli] = resolved;
    expect(prewarmHints(cli, resolved)!.map((s) => s.id)).toEqual(['chosen', ...Array.from({ length: 15 }, (_, i) => `cli${i}`)]);
    expect(prewarmHints(cli, undefined)).toBeUndefined();
    // None can start early: a CLI stage is still told that stages follow; an API stage gets nothing.
    expect(prewarmHints(cli, [api])!.map((s) => s.id)).toEqual(['api']);
    expect(prewarmHints(api, [api])).toEqual([]);
  });
});
