import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildListQuery } from '../../src/library/list-runs.js';
import { parseStatus } from '../../src/cli/commands/list.js';
import type { RecordedRequest } from '../../src/dev/model-server.js';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, stageOf, summarize, waitForState, waitForWaiting } from './workflow-helpers.js';

/*
 * Issue 12's pipeline fields in real runs: the real `claude` binary and the real SDK against the scripted model
 * server, on the dev server. Each test names the seed behaviour it stands for.
 */

const report = (summary: string, outputs: Record<string, unknown> = {}, success = true): string =>
  `Done.\n\`\`\`json\n${JSON.stringify({ success, summary, outputs, ...(success ? {} : { error: summary }) })}\n\`\`\``;
const stageMatch = (pipeline: string, stage: string): string => `Pipeline: ${pipeline} · Stage: ${stage} ·`;
type Rule = NonNullable<ScenarioInput['rules']>[number];
const rule = (pipeline: string, stage: string, ...turns: Rule['turns']): Rule => ({ name: `${pipeline}/${stage}`, match: stageMatch(pipeline, stage), turns });

const COPY = '# Landing page copy\n\nUmbrellas that fly to you.\n\nWrote the hero copy for the growth squad.';

const rules: Rule[] = [
  // contract: none and output: on the API backend, the SDK executor's deliverables.
  rule('free', 'copy', { text: COPY }),
  rule('free', 'config', { text: 'The settings:\n\n```json\n{"retries": 2}\n```' }),
  // contract: none on the CLI backend.
  rule('free', 'notes', { text: 'Some notes.\n\nNoted the launch date.' }),
  // expects: the CLI agent forgets the file, is told so in the same session, then writes it.
  rule(
    'expects',
    'plan',
    { text: report('Planned.') },
    { text: 'Writing it now.', tool: { name: 'Write', input: { file_path: 'docs/plan.md', content: '# Plan\n' } } },
    { text: report('Wrote docs/plan.md.') },
  ),
  rule('expects', 'never', { text: report('Claimed it.') }, { text: report('Claimed it again.') }),
  // templateSyntax: passthrough + promptsDir, BMAD step files and agent-execution spells.
  rule('steps', 'story', { text: report('Story written.') }),
  // needs allowFailure, finally with run.status.
  rule('flows', 'test', { text: report('2 tests fail in auth.spec.ts', {}, false) }),
  rule('flows', 'fix', { text: report('Fixed auth.') }),
  rule('flows', 'record', { text: report('Recorded.') }),
  rule('flows', 'notify', { text: report('Could not reach the chat.', {}, false) }),
  rule('broken', 'work', { text: report('cannot build', {}, false) }),
  rule('broken', 'record', { text: report('Recorded failure.') }),
  rule('spent', 'first', { text: report('Spent it all.'), usage: { input_tokens: 1_000_000, output_tokens: 10 } }),
  rule('spent', 'second', { text: report('Never runs.') }),
  rule('spent', 'record', { text: report('Recorded the spend.') }),
  // timed_out and blocked.
  rule('slow', 'crawl', { text: report('too late'), chunks: 40, chunkDelayMs: 500 }),
  rule('slow', 'record', { text: report('Recorded timeout.') }),
  rule('halt', 'crawl', { text: report('too late'), chunks: 40, chunkDelayMs: 500 }),
  rule('halt', 'record', { text: report('Recorded the cancel.') }),
  rule('asks', 'decide', { text: 'BLOCKED: Should the button be blue or green?' }, { text: report('Green it is.') }),
];

let harness: Harness;
beforeAll(async () => {
  harness = await createHarness('seed-fields', { scenario: { rules } });
});
afterAll(async () => {
  await harness?.close();
});

/** The text of every user message the model got for `stage` of `pipeline`, in order. */
function userTexts(requests: RecordedRequest[], pipeline: string, stage: string): string[] {
  type Content = string | { type?: string; text?: string; content?: unknown }[] | undefined;
  const text = (content: Content): string => (typeof content === 'string' ? content : (content ?? []).map((b) => b.text ?? (typeof b.content === 'string' ? b.content : '')).join('\n'));
  return requests
    .filter((r) => r.path === '/v1/messages' && JSON.stringify(r.body).includes(stageMatch(pipeline, stage)))
    .map((r) => (r.body as { messages: { role: string; content: Content }[] }).messages.filter((m) => m.role === 'user').map((m) => text(m.content)).join('\n---\n'));
}

describe('deliverables as the team wants them', () => {
  test('contract: none completes on the answer alone, written where `output:` says; a missing optional context file is a note', async () => {
    const yaml = [
      'name: free',
      'inputs: { squad: { default: growth } }',
      'context: [{ path: context/product-marketing-context.md, optional: true }]',
      'defaults: { contract: none, retries: 0, heartbeatTimeout: 30s, permissionMode: dontAsk }',
      'stages:',
      '  - id: copy',
      '    backend: anthropic-api',
      '    model: haiku',
      '    output: "outputs/{{inputs.squad}}/landing/{{stage.id}}.md"',
      '    prompt: Write the landing page copy.',
      '  - id: config',
      '    backend: anthropic-api',
      '    model: haiku',
      '    prompt: Write the settings as JSON.',
      '  - id: notes',
      '    needs: [copy]',
      '    prompt: Note the launch date.',
    ].join('\n');
    const state = await harness.finish(await harness.startYaml('free', yaml));
    expect(summarize(state)).toMatchObject({ status: 'completed' });
    const copy = stageOf(state, 'copy').result!;
    expect([copy.summary, copy.outputs]).toEqual(['Wrote the hero copy for the growth squad.', {}]);
    expect(copy.artifacts.map((a) => a.path)).toEqual(['outputs/growth/landing/copy.md']);
    expect(await readFile(path.join(state.workspace!, 'outputs/growth/landing/copy.md'), 'utf8')).toBe(COPY);
    expect(stageOf(state, 'notes').result).toMatchObject({ summary: 'Noted the launch date.', outputs: {} });
    // Without a report block to take out, a closing JSON block is part of the deliverable.
    expect(await readFile(path.join(state.workspace!, 'outputs/config.md'), 'utf8')).toBe('The settings:\n\n```json\n{"retries": 2}\n```');

    const [copyPrompt] = userTexts(harness.modelServer.requests(), 'free', 'copy');
    expect(copyPrompt).toContain('The optional context file context/product-marketing-context.md does not exist');
    expect(copyPrompt).toContain('Your answer is the deliverable');
    expect(copyPrompt).not.toContain('"success": true');
  });

  test('expects: a missing file is asked for once in the same session, then fails OUTPUT_MISSING', async () => {
    const yaml = [
      'name: expects',
      'defaults: { retries: 2, heartbeatTimeout: 30s, permissionMode: dontAsk, allowedTools: [Write] }',
      'stages:',
      '  - id: plan',
      '    prompt: Write the plan to docs/plan.md.',
      '    expects: [docs/plan.md]',
      '  - id: never',
      '    backend: anthropic-api',
      '    model: haiku',
      '    prompt: Write docs/never.md.',
      '    expects: ["docs/never*.md"]',
      '    continueOnFailure: true',
    ].join('\n');
    const state = await harness.finish(await harness.startYaml('expects', yaml));
    expectNoStageLeftRunning(state);
    const plan = stageOf(state, 'plan');
    expect([plan.status, plan.attempt, plan.result?.summary]).toEqual(['completed', 2, 'Wrote docs/plan.md.']);
    expect(await readFile(path.join(state.workspace!, 'docs/plan.md'), 'utf8')).toBe('# Plan\n');
    const planPrompts = userTexts(harness.modelServer.requests(), 'expects', 'plan');
    expect(planPrompts.at(-1)).toContain('You did not write `docs/plan.md`');

    const never = stageOf(state, 'never');
    expect(never.status).toBe('failed');
    expect(never.error?.type).toBe('OUTPUT_MISSING');
    expect(never.error?.message).toContain('the stage did not write docs/never*.md');
    // Asked once more in the same conversation, then not again although retries allow it.
    const neverPrompts = userTexts(harness.modelServer.requests(), 'expects', 'never');
    expect(neverPrompts).toHaveLength(2);
    expect(neverPrompts[1]).toContain('You did not write `docs/never*.md`');
  });
});

describe('step files and templates as they are', () => {
  test('passthrough keeps {{project_name}} for the agent, fills inputs, protects {{raw}}; promptsDir finds a bare name', async () => {
    const dir = path.dirname(await harness.writePipeline('steps-dir-probe', 'name: probe\nstages:\n  - id: a\n    prompt: Do a.\n'));
    await mkdir(path.join(dir, 'bmad-steps'), { recursive: true });
    await writeFile(
      path.join(dir, 'bmad-steps', 'create-story.md'),
      '# Create story for {{project_name}}\nAuthor: {{user_name}}, {{date}}\nFeature: {{inputs.feature}}\nExample: {{raw}}{{inputs.feature}}{{/raw}}\n',
    );
    const file = await harness.writePipeline(
      'steps',
      ['name: steps', 'templateSyntax: passthrough', 'promptsDir: bmad-steps', 'inputs: { feature: { default: dark mode } }', 'defaults: { retries: 0, heartbeatTimeout: 30s }', 'stages:', '  - id: story', '    prompt: create-story'].join('\n'),
    );
    const state = await harness.finish(await harness.start(file));
    expect(summarize(state)).toMatchObject({ status: 'completed' });
    const [prompt] = userTexts(harness.modelServer.requests(), 'steps', 'story');
    expect(prompt).toContain('# Create story for {{project_name}}\nAuthor: {{user_name}}, {{date}}\nFeature: dark mode\nExample: {{inputs.feature}}');
  });
});

describe('failure flows and the end of a run', () => {
  test('a stage that allows a failure reads its status and error; finally stages get run.status, and their failure is a warning', async () => {
    const yaml = [
      'name: flows',
      'defaults: { backend: anthropic-api, model: haiku, retries: 0, heartbeatTimeout: 30s }',
      'stages:',
      '  - id: test',
      '    prompt: Run the tests.',
      '    continueOnFailure: true',
      '  - id: fix',
      '    needs: [{ stage: test, allowFailure: true }]',
      '    prompt: "The tests {{stages.test.status}}: {{stages.test.error}}. Fix what they found."',
      '  - id: ship',
      '    needs: [test]',
      '    prompt: Ship it.',
      'finally:',
      '  - id: record',
      '    prompt: "Run bd update with status {{run.status}} ({{run.error}})."',
      '  - id: notify',
      '    prompt: Tell the team.',
    ].join('\n');
    const state = await harness.finish(await harness.startYaml('flows', yaml));
    expect(summarize(state)).toMatchObject({
      status: 'completed',
      stages: [
        { id: 'test', status: 'failed' },
        { id: 'fix', status: 'completed' },
        { id: 'ship', status: 'skipped' },
        { id: 'record', status: 'completed' },
        { id: 'notify', status: 'failed' },
      ],
    });
    expect(stageOf(state, 'record').finally).toBe(true);
    const requests = harness.modelServer.requests();
    expect(userTexts(requests, 'flows', 'fix')[0]).toContain('The tests failed: [AGENT_REPORTED_FAILURE] stage test: 2 tests fail in auth.spec.ts. Fix what they found.');
    expect(userTexts(requests, 'flows', 'record')[0]).toContain('Run bd update with status completed ().');
    expect(state.warnings).toContain('finally stage notify failed (the run\'s outcome stands): [AGENT_REPORTED_FAILURE] stage notify: Could not reach the chat.');
  });

  test('a failed run still runs its finally stage, which reads the failure', async () => {
    const yaml = [
      'name: broken',
      'defaults: { backend: anthropic-api, model: haiku, retries: 0, heartbeatTimeout: 30s }',
      'stages:',
      '  - id: work',
      '    prompt: Build it.',
      'finally:',
      '  - id: record',
      '    prompt: "Record {{run.status}}: {{run.error}}"',
    ].join('\n');
    const state = await harness.finish(await harness.startYaml('broken', yaml));
    expect(summarize(state)).toMatchObject({ status: 'failed', error: { type: 'AGENT_REPORTED_FAILURE' }, stages: [{ id: 'work', status: 'failed' }, { id: 'record', status: 'completed' }] });
    expect(userTexts(harness.modelServer.requests(), 'broken', 'record')[0]).toContain('Record failed: [AGENT_REPORTED_FAILURE] stage work: cannot build');
  });

  test('a spent budget does not hold back a finally stage', async () => {
    const yaml = [
      'name: spent',
      'budgetUsd: 0.5',
      'onBudgetExceeded: fail',
      'defaults: { backend: anthropic-api, model: haiku, retries: 0, heartbeatTimeout: 30s }',
      'stages:',
      '  - id: first',
      '    prompt: Spend.',
      '  - id: second',
      '    needs: [first]',
      '    prompt: Spend more.',
      'finally:',
      '  - id: record',
      '    prompt: "Record {{run.status}}."',
    ].join('\n');
    const state = await harness.finish(await harness.startYaml('spent', yaml));
    expect(summarize(state)).toMatchObject({ status: 'failed', error: { type: 'BUDGET_EXCEEDED' }, stages: [{ id: 'first', status: 'completed' }, { id: 'second', status: 'failed' }, { id: 'record', status: 'completed' }] });
    expect(userTexts(harness.modelServer.requests(), 'spent', 'second')).toEqual([]);
  });

  test('a cancelled run runs its finally stage with run.status cancelled, then ends cancelled', async () => {
    const handle = await harness.startYaml(
      'halt',
      [
        'name: halt',
        'defaults: { backend: anthropic-api, model: haiku, retries: 0, heartbeatTimeout: 10s }',
        'stages:',
        '  - id: crawl',
        '    prompt: Crawl.',
        'finally:',
        '  - id: record',
        '    prompt: "Record {{run.status}}: {{run.error}}"',
      ].join('\n'),
    );
    await waitForState(handle, (s) => stageOf(s, 'crawl').status === 'running');
    await handle.cancel();
    const state = await harness.finish(handle);
    expect(summarize(state)).toMatchObject({ status: 'cancelled', stages: [{ id: 'crawl', status: 'cancelled' }, { id: 'record', status: 'completed' }] });
    expect(userTexts(harness.modelServer.requests(), 'halt', 'record')[0]).toContain('Record cancelled: the run was cancelled');
  });

  test('the pipeline timeout ends a run as timed_out (finally stages see it); a question makes it blocked; list finds both', async () => {
    const slow = await harness.startYaml(
      'slow',
      [
        'name: slow',
        'timeout: 3s',
        'defaults: { backend: anthropic-api, model: haiku, retries: 0, heartbeatTimeout: 10s }',
        'stages:',
        '  - id: crawl',
        '    prompt: Crawl.',
        'finally:',
        '  - id: record',
        '    prompt: "Record {{run.status}}."',
      ].join('\n'),
    );
    const asks = await harness.startYaml('asks', 'name: asks\ndefaults: { backend: anthropic-api, model: haiku, retries: 0 }\nstages:\n  - id: decide\n    prompt: Pick a colour.\n');
    const blocked = await waitForWaiting(asks, 'decide', 'answer');
    expect(blocked.status).toBe('blocked');

    const state = await harness.finish(slow);
    expect(summarize(state)).toMatchObject({ status: 'timed_out', error: { type: 'PIPELINE_TIMEOUT' }, stages: [{ id: 'crawl', status: 'cancelled' }, { id: 'record', status: 'completed' }] });
    expect(userTexts(harness.modelServer.requests(), 'slow', 'record')[0]).toContain('Record timed_out.');

    // `list --status` reads the search attribute the workflow keeps; visibility catches up a moment later.
    const found = async (status: string, id: string): Promise<boolean> => {
      for (let i = 0; i < 60; i++) {
        // Only this run: the dev server is shared by every test file, and another file's runs may be encrypted.
        const query = `${buildListQuery({ status: parseStatus(status) })} AND WorkflowId = '${id}'`;
        for await (const run of harness.client.workflow.list({ query })) if (run.workflowId === id) return true;
        await sleep(500);
      }
      return false;
    };
    expect(await found('timed_out', slow.workflowId)).toBe(true);
    expect(await found('blocked', asks.workflowId)).toBe(true);
    expect(await found('waiting', asks.workflowId)).toBe(true);
    await asks.terminate('test over');
  });
});
