import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { prepareRunInput } from '../../src/library/pipeline-source.js';
import { validatePipelineFile } from '../../src/library/validate-pipeline.js';
import { initRepo } from '../helpers/git-repo.js';
import { answerStageUpdate } from '../../src/contracts/messages.js';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, stageOf, summarize, waitForWaiting } from './workflow-helpers.js';

const EXAMPLE = path.join(PROJECT_ROOT, 'examples', 'bmad-story');

describe('the bmad-story example', () => {
  let harness: Harness;
  let base: string;
  let project: string;
  beforeAll(async () => {
    harness = await createHarness('example-bmad', { scenario: path.join(EXAMPLE, 'scenario.yaml') });
    // The example sits at the root of the project's repository, where BMAD installed `_bmad/`.
    base = await mkdtemp(path.join(tmpdir(), 'bmad-story-'));
    project = path.join(base, 'project');
    await cp(EXAMPLE, project, { recursive: true });
    await initRepo(project);
  });
  afterAll(async () => {
    await harness?.close();
    await rm(base, { recursive: true, force: true });
  });

  test('validate passes BMAD\'s own placeholders through as notes', async () => {
    const { problems, notes } = await validatePipelineFile(path.join(EXAMPLE, 'pipeline.yaml'));
    expect(problems).toEqual([]);
    expect(new Set(notes.map((n) => n.field.replace(/^.*\{\{/, '{{')))).toEqual(new Set(['{{project_name}}', '{{user_name}}', '{{date}}']));
  });

  test('runs verbatim BMAD files: an elicitation question answered by a person, QA review with one rework', { timeout: 240_000 }, async () => {
    const file = path.join(project, 'pipeline.yaml');
    // BMAD's elicitation context, as `--input elicitation=@answers.json` gives it.
    const { inputs } = await prepareRunInput(file, { inputs: { elicitation: { file: path.join(project, 'answers.json') } } });
    const handle = await harness.start(file, inputs);
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
    // The elicitation context reached the agent as a key-value section.
    expect(analyst).toContain('- elicitation:\\n  audience: readers of long-form articles\\n  reading_speed_wpm: 230\\n  tone: plain, no marketing language');
    // The run works in the repository BMAD is installed in: the analyst's read of _bmad/config.yaml found the values
    // its placeholders stand for ({project_name}, {output_folder}).
    const config = bodyOf('analyst', 1);
    expect(config).toContain('project_name: Inkwell');
    expect(config).toContain('output_folder: docs');
    expect(await readFile(path.join(state.workspace!, '_bmad', 'config.yaml'), 'utf8')).toContain('project_name: Inkwell');
    // The person's answer continued the analyst's session.
    expect(bodyOf('analyst', 2)).toContain('Prose only: skip code blocks.');
    // The prior artifact reached the developer by path; QA's feedback reached it in the rework round.
    expect(bodyOf('dev', 0)).toContain('Files (in your working directory): docs/brief.md');
    expect(bodyOf('dev', 0)).not.toContain('words inside code blocks are not counted');
    expect(bodyOf('dev', 3)).toContain('AC2 has no test');
    // The story's AgentResult(status, artifacts, session_id, duration_seconds): each stage's result.
    const analystResult = stageOf(state, 'analyst').result!;
    expect(analystResult.artifacts.map((a) => a.path)).toContain('docs/brief.md');
    expect(analystResult.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(analystResult.durationMs).toBeGreaterThan(0);
    expect(state.reviews?.qa.findings.map((f) => [f.id, f.state, f.text.split(':')[0]])).toEqual([['F1', 'fixed', 'AC2 has no test']]);
  });
});
