import { mkdir, mkdtemp, readdir, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

const EXAMPLE = path.join(PROJECT_ROOT, 'examples', 'sdk-executor');

/** The example's defaults, as `{{inputs.…}}` fills them. */
const INPUTS: Record<string, string> = {
  squad: 'content',
  task_id: 'task-042',
  from: 'director',
  goal: 'Launch page for the new team plan',
  requirements: 'Headline, three benefits, one call to action; under 200 words.',
  priority: 'high',
  format: 'markdown',
};

/** steps/task.md with its variables filled as the plan's prompt builder would: nothing else changes. */
async function expectedTaskPrompt(stageId: string, context: string): Promise<string> {
  const template = await readFile(path.join(EXAMPLE, 'steps', 'task.md'), 'utf8');
  return template.replace(/\{\{(inputs\.[a-z_]+|stage\.id|context)\}\}/g, (_, name: string) =>
    name === 'context' ? context : name === 'stage.id' ? stageId : INPUTS[name.slice('inputs.'.length)],
  );
}

type Request = { model: string; system: { text: string }[]; messages: { role: string; content: string | { type: string; text: string }[] }[] };
const userText = (request: Request): string => {
  const content = request.messages[0].content;
  return typeof content === 'string' ? content : content.map((b) => b.text).join('');
};

describe('the sdk-executor example', () => {
  let harness: Harness;
  let scenario: ScenarioInput;
  let shared: string;
  beforeAll(async () => {
    harness = await createHarness('example-sdk', { scenario: path.join(EXAMPLE, 'scenario.yaml') });
    scenario = parse(await readFile(path.join(EXAMPLE, 'scenario.yaml'), 'utf8')) as ScenarioInput;
    // The squad's shared workspace, in the system's temp folder (which the test worker allows).
    shared = await mkdtemp(path.join(tmpdir(), 'sdk-executor-workspace-'));
  });
  afterAll(async () => {
    await harness?.close();
    await rm(shared, { recursive: true, force: true });
  });

  const requestOf = (rule: string) => harness.modelServer.requests().find((r) => r.rule === rule && r.status === 200)?.body as Request;
  const runIn = async (workspace: string) => harness.finish(await harness.start(path.join(EXAMPLE, 'pipeline.yaml'), { workspace }));

  test('writes each skill\'s whole answer at outputs/{squad}/{skill}/{task}.md in the shared workspace, from the prompt as written', async () => {
    harness.modelServer.reset();
    const state = await runIn(shared);
    expectNoStageLeftRunning(state);
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    // The deliverables are in the shared folder, where later tasks and people read them; the worker's bookkeeping is not.
    expect(state.workspace).toBe(await realpath(shared));
    const copy = await readFile(path.join(shared, 'outputs/content/copywriting/task-042.md'), 'utf8');
    expect(copy).toContain('# Your whole team, one plan');
    expect(copy).toContain('[Start your team trial](https://example.com/teams)');
    expect(await readFile(path.join(shared, 'outputs/content/seo-audit/task-042.md'), 'utf8')).toContain('## SEO findings');
    expect(await readFile(path.join(shared, 'outputs/content/launch-review/task-042.md'), 'utf8')).toContain('Ready to ship after one title change.');
    expect(await readdir(shared)).toEqual(['outputs']);
    // promptFormat: raw: the model received exactly the prompt file's text (no product context yet), and the skill
    // with its references as the whole system prompt.
    for (const skill of ['copywriting', 'seo-audit']) {
      expect(requestOf(skill).messages).toHaveLength(1);
      expect(userText(requestOf(skill))).toBe(await expectedTaskPrompt(skill, ''));
    }
    expect(requestOf('copywriting').system.map((b) => b.text)).toEqual([
      [
        '# Copywriting',
        '',
        'You are a senior conversion copywriter. You write clear, specific copy that speaks to one reader and asks for\none action. Lead with the benefit, prove it, then ask.',
        '',
        '## Output format\nA headline, a subheadline, the body with its benefits, and the call to action, in markdown.',
        '',
        `## Reference: references/voice.md\n\n${(await readFile(path.join(EXAMPLE, 'skills/copywriting/references/voice.md'), 'utf8')).trim()}`,
        '',
        `## Reference: references/frameworks.md\n\n${(await readFile(path.join(EXAMPLE, 'skills/copywriting/references/frameworks.md'), 'utf8')).trim()}`,
      ].join('\n'),
    ]);
    // contract: none: no report block was asked for; the summary is the answer's last paragraph, no outputs.
    const seo = stageOf(state, 'seo-audit').result!;
    expect(seo.summary).toBe('The page plan is sound once the title carries the keyword.');
    expect(seo.outputs).toEqual({});
    expect([requestOf('copywriting').model, requestOf('seo-audit').model, requestOf('launch-review').model].map((m) => /opus|sonnet|haiku/.exec(m)?.[0])).toEqual(['sonnet', 'haiku', 'opus']);
    // The review (wrapped) read both deliverables (earlier work goes in a system block of its own, for the prompt
    // cache); the two skills ran at the same time.
    expect(JSON.stringify(requestOf('launch-review'))).toContain('Put \\"team plan\\" in the title');
    const [a, b] = [stageOf(state, 'copywriting'), stageOf(state, 'seo-audit')];
    expect(a.startedAt!).toBeLessThan(b.finishedAt!);
    expect(b.startedAt!).toBeLessThan(a.finishedAt!);
    expect(stageOf(state, 'launch-review').totals).toMatchObject({ inputTokens: 2600, outputTokens: 60, attempts: 1 });
  });

  test('reads the product context from the shared workspace when the run starts its stages', async () => {
    harness.modelServer.reset();
    const context = 'Product: Tandem, a shared task list for small teams.\n';
    await mkdir(path.join(shared, 'context'), { recursive: true });
    await writeFile(path.join(shared, 'context', 'product-marketing-context.md'), context);
    const state = await runIn(shared);
    expect(state.status).toBe('completed');
    expect(userText(requestOf('seo-audit'))).toBe(await expectedTaskPrompt('seo-audit', context));
    // The earlier run's deliverables were overwritten in place by this task's.
    expect(await readFile(path.join(shared, 'outputs/content/seo-audit/task-042.md'), 'utf8')).toContain('## SEO findings');
  });

  test('fails fast: a skill that fails for good aborts the one running beside it', async () => {
    const rules = (scenario.rules ?? []).map((rule) => {
      if (rule.name === 'seo-audit') return { ...rule, turns: [{ error: { status: 401 } }] };
      if (rule.name === 'copywriting') return { ...rule, turns: [{ ...rule.turns[0], chunks: 40, chunkDelayMs: 500 }] };
      return rule;
    });
    harness.modelServer.setScenario({ ...scenario, rules });
    const state = await runIn(await mkdtemp(path.join(shared, 'fail-fast-')));
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('failed');
    expect(state.error?.type, state.error?.message).toBe('API_KEY_REJECTED');
    expect(stageOf(state, 'seo-audit').totals?.attempts).toBe(1);
    expect(stageOf(state, 'copywriting').status).toBe('cancelled');
    expect(stageOf(state, 'launch-review').status).toBe('skipped');
  });
});
