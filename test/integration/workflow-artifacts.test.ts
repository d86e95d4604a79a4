import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

/*
 * Stages that run at once share the run folder. Each must report as artifacts the files it wrote, not the files a
 * stage running alongside wrote meanwhile. Two real claude CLI stages and one through the SDK, the scripted model.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const edit = (file: string): Rule['turns'][number]['tool'] => ({ name: 'Edit', input: { file_path: file, old_string: '', new_string: `${file}\n` } });
const RULES: Rule[] = [
  {
    // Writes first, then answers slowly: the others write while it still runs.
    name: 'a',
    match: 'Pipeline: shared · Stage: a ·',
    turns: [{ text: 'Writing a.', tool: edit('a.txt') }, { text: report('Wrote a.'), chunks: 30, chunkDelayMs: 150 }],
  },
  {
    name: 'b',
    match: 'Pipeline: shared · Stage: b ·',
    turns: [{ text: 'Thinking first. '.repeat(10), chunks: 10, chunkDelayMs: 80, tool: edit('docs/b.md') }, { text: report('Wrote b.') }],
  },
  { name: 'notes', match: 'Pipeline: shared · Stage: notes ·', turns: [{ text: `Notes.\n${report('Noted.')}`, chunks: 10, chunkDelayMs: 100 }] },
];

const PIPELINE = [
  'name: shared',
  'defaults: { backend: claude-cli, model: sonnet, retries: 0, heartbeatTimeout: 10s, permissionMode: dontAsk, allowedTools: [Edit, Read] }',
  'stages:',
  '  - { id: a, prompt: Write a. }',
  '  - { id: b, prompt: Write b. }',
  '  - { id: notes, prompt: Take notes., backend: anthropic-api, model: haiku, maxTokens: 500 }',
].join('\n');

describe('stages running at once in one run folder', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('shared-folder', { scenario: { rules: RULES } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  test('each reports the files its own agent wrote', async () => {
    const handle = await harness.start(await harness.writePipeline('shared', PIPELINE));
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    const results = ['a', 'b', 'notes'].map((id) => stageOf(state, id));
    // They did overlap: a was still running when the others had written and finished.
    const [a, b, notes] = results;
    expect(Math.max(b.finishedAt!, notes.finishedAt!)).toBeLessThan(a.finishedAt!);
    expect(a.startedAt!).toBeLessThan(Math.min(b.finishedAt!, notes.finishedAt!));
    const artifacts = Object.fromEntries(results.map((s) => [s.id, s.result?.artifacts.map((f) => f.path)]));
    expect(artifacts).toEqual({ a: ['a.txt'], b: ['docs/b.md'], notes: ['outputs/notes.md'] });
  });
});
