import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

const EXAMPLE = path.join(PROJECT_ROOT, 'examples', 'sdk-executor');

describe('the sdk-executor example', () => {
  let harness: Harness;
  let scenario: ScenarioInput;
  let copy: string;
  beforeAll(async () => {
    harness = await createHarness('example-sdk', { scenario: path.join(EXAMPLE, 'scenario.yaml') });
    scenario = parse(await readFile(path.join(EXAMPLE, 'scenario.yaml'), 'utf8')) as ScenarioInput;
    copy = await mkdtemp(path.join(tmpdir(), 'sdk-executor-'));
    await cp(EXAMPLE, copy, { recursive: true });
  });
  afterAll(async () => {
    await harness?.close();
    await rm(copy, { recursive: true, force: true });
  });

  const requestOf = (rule: string) => harness.modelServer.requests().find((r) => r.rule === rule && r.status === 200)?.body as { model: string; system: unknown; messages: unknown[] };

  test('writes each skill\'s whole answer at outputs/{squad}/{skill}/{task}.md, with skills, tiers and no product context', async () => {
    harness.modelServer.reset();
    const state = await harness.finish(await harness.start(path.join(EXAMPLE, 'pipeline.yaml')));
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    const dir = state.workspace!;
    const copy = await readFile(path.join(dir, 'outputs/content/copywriting/task-042.md'), 'utf8');
    expect(copy).toContain('# Your whole team, one plan');
    expect(copy).toContain('[Start your team trial](https://example.com/teams)');
    expect(await readFile(path.join(dir, 'outputs/content/seo-audit/task-042.md'), 'utf8')).toContain('## SEO findings');
    expect(await readFile(path.join(dir, 'outputs/content/launch-review/task-042.md'), 'utf8')).toContain('Ready to ship after one title change.');
    // contract: none: no report block was asked for; the summary is the answer's last paragraph, no outputs.
    const seo = stageOf(state, 'seo-audit').result!;
    expect(seo.summary).toBe('The page plan is sound once the title carries the keyword.');
    expect(seo.outputs).toEqual({});
    expect(JSON.stringify(requestOf('copywriting').messages)).not.toContain('"success"');
    // The skill is the system prompt, with its references; the tiers chose the models.
    const system = JSON.stringify(requestOf('copywriting').system);
    expect(system).toContain('You are a senior conversion copywriter.');
    expect(system).toContain('Voice: plain words, short sentences');
    expect(system).toContain('Frameworks: PAS');
    expect([requestOf('copywriting').model, requestOf('seo-audit').model, requestOf('launch-review').model].map((m) => /opus|sonnet|haiku/.exec(m)?.[0])).toEqual(['sonnet', 'haiku', 'opus']);
    // The task reached the prompt; the missing product context is a note, not a failure.
    const prompt = JSON.stringify(requestOf('copywriting').messages);
    expect(prompt).toContain('**Task ID:** task-042');
    expect(prompt).toContain('The optional context file context/product-marketing-context.md does not exist');
    // The review read both deliverables (earlier work goes in a system block of its own, for the prompt cache); the
    // two skills ran at the same time.
    expect(JSON.stringify(requestOf('launch-review'))).toContain('Put \\"team plan\\" in the title');
    const [a, b] = [stageOf(state, 'copywriting'), stageOf(state, 'seo-audit')];
    expect(a.startedAt!).toBeLessThan(b.finishedAt!);
    expect(b.startedAt!).toBeLessThan(a.finishedAt!);
    expect(stageOf(state, 'launch-review').totals).toMatchObject({ inputTokens: 2600, outputTokens: 60, attempts: 1 });
  });

  test('gives every skill the product context when it exists', async () => {
    harness.modelServer.reset();
    await mkdir(path.join(copy, 'context'), { recursive: true });
    await writeFile(path.join(copy, 'context', 'product-marketing-context.md'), 'Product: Tandem, a shared task list for small teams.\n');
    const state = await harness.finish(await harness.start(path.join(copy, 'pipeline.yaml')));
    expect(state.status).toBe('completed');
    // Context files go in a system block of their own (for the prompt cache), the rest of the prompt in the message.
    const prompt = JSON.stringify(requestOf('seo-audit'));
    expect(prompt).toContain('Product: Tandem, a shared task list for small teams.');
    expect(prompt).not.toContain('does not exist');
  });

  test('fails fast: a skill that fails for good aborts the one running beside it', async () => {
    const rules = (scenario.rules ?? []).map((rule) => {
      if (rule.name === 'seo-audit') return { ...rule, turns: [{ error: { status: 401 } }] };
      if (rule.name === 'copywriting') return { ...rule, turns: [{ ...rule.turns[0], chunks: 40, chunkDelayMs: 500 }] };
      return rule;
    });
    harness.modelServer.setScenario({ ...scenario, rules });
    const state = await harness.finish(await harness.start(path.join(EXAMPLE, 'pipeline.yaml')));
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('failed');
    expect(state.error?.type).toBe('API_KEY_REJECTED');
    expect(stageOf(state, 'seo-audit').totals?.attempts).toBe(1);
    expect(stageOf(state, 'copywriting').status).toBe('cancelled');
    expect(stageOf(state, 'launch-review').status).toBe('skipped');
  });
});
