import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { OUTPUT_CONTRACT } from '../../src/activities/prompt/system-prompt.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

/*
 * `promptFormat: raw`: the model receives the stage prompt exactly as written (its `{{…}}` filled) and the agent file
 * with its references as the system prompt, through the real SDK and the real `claude` binary.
 */

const AGENT = '---\nname: writer\nreferences: [refs/voice.md]\n---\nYou write launch notes.\n\nKeep them short.\n';
const VOICE = 'Voice: plain words.\n';
/** Two blank lines, trailing spaces, a heading and no final newline: none of it may change on the way. */
const PROMPT = '## Product Context\n{{context}}\n\n\n## Task for {{stage.id}}\n- topic: {{inputs.topic}}   \nWrite the notes.';
const CONTEXT = 'Product: Tandem, a shared task list.\n';
const PIPELINE = `
name: raw-prompts
inputs:
  topic: { default: team plan }
context: [context/product.md]
defaults: { promptFormat: raw, model: haiku }
stages:
  - id: api
    backend: anthropic-api
    contract: none
    agent: agents/writer.md
    prompt: steps/task.md
  - id: cli
    backend: claude-cli
    agent: agents/writer.md
    allowedTools: [Read]
    prompt: steps/task.md
`;

/** The persona as the agent file and its reference make it: the body, then the reference under its heading. */
const PERSONA = 'You write launch notes.\n\nKeep them short.\n\n## Reference: refs/voice.md\n\nVoice: plain words.';
const expectedPrompt = (stageId: string): string =>
  `## Product Context\n${CONTEXT}\n\n\n## Task for ${stageId}\n- topic: team plan   \nWrite the notes.`;

type Body = { system?: { text: string }[]; messages: { role: string; content: string | { type: string; text?: string }[] }[] };
const textBlocks = (content: Body['messages'][number]['content']): string[] => (typeof content === 'string' ? [content] : content.flatMap((b) => (b.type === 'text' && b.text !== undefined ? [b.text] : [])));

describe('promptFormat: raw', () => {
  let harness: Harness;
  let dir: string;
  beforeAll(async () => {
    harness = await createHarness('raw-prompts', {
      scenario: {
        rules: [
          { name: 'api', match: '## Task for api', turns: [{ text: '# Notes\n\nThe team plan ships today.' }] },
          { name: 'cli', match: '## Task for cli', turns: [{ text: 'Done.\n```json\n{"success": true, "summary": "Wrote the notes.", "outputs": {}}\n```' }] },
        ],
      },
    });
    dir = await mkdtemp(path.join(tmpdir(), 'raw-prompts-'));
    await mkdir(path.join(dir, 'agents', 'refs'), { recursive: true });
    await mkdir(path.join(dir, 'steps'), { recursive: true });
    await mkdir(path.join(dir, 'context'), { recursive: true });
    await writeFile(path.join(dir, 'agents', 'writer.md'), AGENT);
    await writeFile(path.join(dir, 'agents', 'refs', 'voice.md'), VOICE);
    await writeFile(path.join(dir, 'steps', 'task.md'), PROMPT);
    await writeFile(path.join(dir, 'context', 'product.md'), CONTEXT);
    await writeFile(path.join(dir, 'pipeline.yaml'), PIPELINE);
  });
  afterAll(async () => {
    await harness?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('sends the prompt and the agent file byte for byte, to the API and to the CLI', async () => {
    harness.modelServer.reset();
    const state = await harness.finish(await harness.start(path.join(dir, 'pipeline.yaml')));
    expectNoStageLeftRunning(state);
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    const requestOf = (rule: string): Body => harness.modelServer.requests().find((r) => r.rule === rule && r.status === 200)!.body as Body;

    // API, `contract: none`: the user message is the prompt, the system prompt the agent file; nothing else at all.
    const api = requestOf('api');
    expect(api.messages).toHaveLength(1);
    expect(textBlocks(api.messages[0].content)).toEqual([expectedPrompt('api')]);
    expect(api.system?.map((b) => b.text)).toEqual([PERSONA]);
    expect(stageOf(state, 'api').result?.summary).toBe('The team plan ships today.');
    expect(await readFile(path.join(state.workspace!, 'outputs', 'api.md'), 'utf8')).toBe('# Notes\n\nThe team plan ships today.');

    // CLI: the prompt arrives as its own text block, exactly; Claude Code's system prompt ends with the agent file
    // and, as this stage reports (`contract: json`), the output contract.
    const cli = requestOf('cli');
    const firstUser = cli.messages.find((m) => m.role === 'user')!;
    expect(textBlocks(firstUser.content)).toContain(expectedPrompt('cli'));
    expect(JSON.stringify(cli.messages)).not.toContain('You are one stage of an automated pipeline');
    const lastSystem = cli.system!.at(-1)!.text;
    expect(lastSystem.endsWith(`\n\n${PERSONA}\n\n${OUTPUT_CONTRACT}`)).toBe(true);
    expect(stageOf(state, 'cli').result?.summary).toBe('Wrote the notes.');
  });
});

describe('raw prompts keep their inputs, and the pipeline\'s system prompt goes as written', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('raw-inputs', {
      scenario: {
        rules: [
          { name: 'plan', match: 'Write the plan.', turns: [{ text: '1. Add greet().\n2. Test it.' }] },
          { name: 'build', match: 'Build from this plan', turns: [{ text: 'Done.\n```json\n{"success": true, "summary": "Built.", "outputs": {}}\n```' }] },
          { name: 'house-cli', match: 'Follow them in cli.', turns: [{ text: 'Done.\n```json\n{"success": true, "summary": "Followed the rules.", "outputs": {}}\n```' }] },
          { name: 'house-api', match: 'Answer plainly.', turns: [{ text: 'Plain answer.' }] },
        ],
      },
    });
  });
  afterAll(() => harness?.close());
  const requestOf = (rule: string): Body => harness.modelServer.requests().find((r) => r.rule === rule && r.status === 200)!.body as Body;

  test('a raw stage with a missing input fails INPUT_NOT_FOUND before its agent starts', { timeout: 120_000 }, async () => {
    const state = await harness.finish(
      await harness.startYaml('raw-missing', 'name: raw-missing\ndefaults: { promptFormat: raw, backend: anthropic-api, model: haiku }\nstages:\n  - id: build\n    inputs: [outputs/plan.md]\n    prompt: "Build from this plan:\\n{{files}}"\n'),
    );
    expect(state.status).toBe('failed');
    expect(state.error?.type).toBe('INPUT_NOT_FOUND');
    expect(state.error?.message).toContain('input outputs/plan.md is missing from the workspace');
    expect(harness.modelServer.requests().filter((r) => r.rule === 'build')).toHaveLength(0);
  });

  test('{{files}} places a raw stage\'s input files, each under its path, in the prompt sent to the CLI', { timeout: 120_000 }, async () => {
    const yaml = `name: raw-files
defaults: { promptFormat: raw, model: haiku }
stages:
  - id: plan
    backend: anthropic-api
    contract: none
    prompt: Write the plan.
  - id: build
    needs: [plan]
    backend: claude-cli
    allowedTools: [Read]
    inputs: [outputs/plan.md]
    prompt: "Build from this plan:\\n{{files}}\\nThat is all."
`;
    const state = await harness.finish(await harness.startYaml('raw-files', yaml));
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    const firstUser = requestOf('build').messages.find((m) => m.role === 'user')!;
    expect(textBlocks(firstUser.content)).toContain('Build from this plan:\n### outputs/plan.md\n```\n1. Add greet().\n2. Test it.\n```\nThat is all.');
  });

  test('with systemPrompt set, the agent gets exactly that text filled, plus the output contract only when it reports', { timeout: 120_000 }, async () => {
    const file = await harness.writePipeline(
      'house',
      `name: house
systemPrompt: house.md
inputs: { bead: {} }
defaults: { model: haiku }
stages:
  - id: cli
    backend: claude-cli
    allowedTools: [Read]
    prompt: "Follow them in {{stage.id}}."
  - id: api
    backend: anthropic-api
    promptFormat: raw
    contract: none
    prompt: "Answer plainly."
`,
    );
    await writeFile(path.join(path.dirname(file), 'house.md'), 'House rules for bead {{inputs.bead}}.\n\n{{stage_prompt}}\n');
    const state = await harness.finish(await harness.start(file, { bead: 'B-9' }));
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    // The CLI stage (wrapped, `contract: json`): the system prompt filled, no heading or section around the prompt;
    // the contract follows Claude Code's own system prompt.
    const cli = requestOf('house-cli');
    expect(textBlocks(cli.messages.find((m) => m.role === 'user')!.content)).toContain('House rules for bead B-9.\n\nFollow them in cli.\n');
    expect(JSON.stringify(cli.messages)).not.toContain('## Your task');
    expect(cli.system!.at(-1)!.text.endsWith(`\n\n${OUTPUT_CONTRACT}`)).toBe(true);
    // The raw API stage with `contract: none`: exactly the system prompt filled, and nothing else at all.
    const api = requestOf('house-api');
    expect(api.messages).toHaveLength(1);
    expect(textBlocks(api.messages[0].content)).toEqual(['House rules for bead B-9.\n\nAnswer plainly.\n']);
    expect(api.system ?? []).toEqual([]);
  });
});
