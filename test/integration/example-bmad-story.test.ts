import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { validatePipelineFile } from '../../src/library/validate-pipeline.js';
import { answerStageUpdate } from '../../src/workflows/messages.js';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, stageOf, summarize, waitForWaiting } from './workflow-helpers.js';

const EXAMPLE = path.join(PROJECT_ROOT, 'examples', 'bmad-story');

describe('the bmad-story example', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('example-bmad', { scenario: path.join(EXAMPLE, 'scenario.yaml') });
  });
  afterAll(async () => harness?.close());

  test('validate passes BMAD\'s own placeholders through as notes', async () => {
    const { problems, notes } = await validatePipelineFile(path.join(EXAMPLE, 'pipeline.yaml'));
    expect(problems).toEqual([]);
    expect(new Set(notes.map((n) => n.field.replace(/^.*\{\{/, '{{')))).toEqual(new Set(['{{project_name}}', '{{user_name}}', '{{date}}']));
  });

  test('runs verbatim BMAD files: an elicitation question answered by a person, QA review with one rework', { timeout: 240_000 }, async () => {
    const handle = await harness.start(path.join(EXAMPLE, 'pipeline.yaml'));
    const waiting = await waitForWaiting(handle, 'analyst', 'answer', 120_000);
    expect(stageOf(waiting, 'analyst').waitingFor?.question).toBe('Should the word count include code blocks, or count prose only?');
    await handle.executeUpdate(answerStageUpdate, { args: [{ stage: 'analyst', text: 'Prose only: skip code blocks.' }] });
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(summarize(state)).toMatchObject({
      status: 'completed',
      stages: [
        { id: 'analyst', status: 'completed' },
        { id: 'dev', status: 'completed', round: 2 },
        { id: 'qa', status: 'completed', round: 2 },
      ],
    });
    expect(await readFile(path.join(state.workspace!, 'docs', 'brief.md'), 'utf8')).toContain('AC2: words inside code blocks are not counted');
    expect(await readFile(path.join(state.workspace!, 'test', 'word-count.test.js'), 'utf8')).toContain("test('AC2: skips code blocks'");

    const requests = harness.modelServer.requests().filter((r) => r.path === '/v1/messages' && r.status === 200);
    const bodyOf = (rule: string, turn: number): string => JSON.stringify(requests.find((r) => r.rule === rule && r.turn === turn)?.body);
    // The step file and agent definition arrived verbatim: BMAD's placeholders untouched, ours filled.
    const analyst = bodyOf('analyst', 0);
    expect(analyst).toContain('FOCUS on the reader\'s need for {{project_name}}');
    expect(analyst).toContain('working with {{user_name}}');
    expect(analyst).toContain('Date it {{date}}.');
    expect(analyst).toContain('As a reader, I want a word count for each article');
    expect(analyst).toContain('<agent id=\\"analyst.agent.yaml\\" name=\\"Mary\\" title=\\"Business Analyst\\"');
    // The person's answer continued the analyst's session.
    expect(bodyOf('analyst', 2)).toContain('Prose only: skip code blocks.');
    // The prior artifact reached the developer by path; QA's feedback reached it in the rework round.
    expect(bodyOf('dev', 0)).toContain('docs/brief.md');
    expect(bodyOf('dev', 3)).toContain('AC2 has no test');
    expect(state.reviews?.qa.findings.map((f) => [f.id, f.state, f.text.split(':')[0]])).toEqual([['F1', 'fixed', 'AC2 has no test']]);
  });
});
