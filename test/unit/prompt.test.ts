import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyAgentDefaults } from '../../src/activities/prompt/agent-file.js';
import { splitFrontmatter } from '../../src/pipeline/agent-frontmatter.js';
import { assemblePrompt, MAX_INLINE_FILE_BYTES, type AssemblePromptOptions } from '../../src/activities/prompt/stage-prompt.js';
import { composePrompt, formatFile } from '../../src/activities/prompt/compose.js';
import { DEFAULT_SYSTEM_PROMPT, OUTPUT_CONTRACT } from '../../src/activities/prompt/system-prompt.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { resolveStage, type ResolvedStage } from '../../src/pipeline/stage-options.js';
import type { TemplateContext } from '../../src/pipeline/template.js';

/** The stages of a pipeline file, resolved as the workflow resolves them. */
function stagesOf(yaml: string): Record<string, ResolvedStage> {
  const pipeline = parsePipeline(yaml, 'p.yaml');
  return Object.fromEntries(pipeline.stages.map((s) => [s.id, resolveStage(pipeline, s)]));
}

const context = (overrides: Partial<TemplateContext> = {}): TemplateContext => ({
  inputs: { feature: 'dark mode' },
  stages: {},
  run: { id: 'run-7', pipeline: 'demo' },
  attempt: 1,
  previous: { failed: '' },
  ...overrides,
});

/** Runs `fn` and returns the failure it throws (a catalogue ApplicationFailure). */
async function failureOf(fn: () => Promise<unknown>): Promise<{ type?: string; message: string; nonRetryable?: boolean }> {
  try {
    await fn();
  } catch (err) {
    return err as { type?: string; message: string; nonRetryable?: boolean };
  }
  throw new Error('expected a failure');
}

let baseDir: string;
let workspaceDir: string;
beforeEach(async () => {
  baseDir = await mkdtemp(path.join(tmpdir(), 'prompt-base-'));
  workspaceDir = await mkdtemp(path.join(tmpdir(), 'prompt-ws-'));
});
afterEach(async () => {
  await rm(baseDir, { recursive: true, force: true });
  await rm(workspaceDir, { recursive: true, force: true });
});

const write = async (dir: string, file: string, text: string): Promise<void> => {
  await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
  await writeFile(path.join(dir, file), text);
};

const options = (stage: ResolvedStage, extra: Partial<AssemblePromptOptions> = {}): AssemblePromptOptions => ({
  stage,
  baseDir,
  workspaceDir,
  context: context(),
  ...extra,
});

describe('agent files', () => {
  it('split into frontmatter and persona; a file without frontmatter is all persona', () => {
    expect(splitFrontmatter('---\nname: dev\ntools: Read, Edit\n---\nYou build.\n')).toEqual({ frontmatter: { name: 'dev', tools: 'Read, Edit' }, body: 'You build.' });
    expect(splitFrontmatter('Just a persona.')).toEqual({ frontmatter: {}, body: 'Just a persona.' });
  });

  it('give the persona, with references under headings, and warn about a missing reference', async () => {
    await write(baseDir, 'agents/dev.md', '---\nname: dev\nreferences: [refs/style.md, refs/gone.md]\n---\nYou are a careful developer.\n');
    await write(baseDir, 'agents/refs/style.md', 'Use tabs.\n');
    const { spec } = stagesOf('name: p\nstages:\n  - id: spec\n    agent: agents/dev.md\n    prompt: Write it.\n');
    const assembled = await assemblePrompt(options(spec));
    expect(assembled.prompt.system).toBe('You are a careful developer.\n\n## Reference: refs/style.md\n\nUse tabs.');
    expect(assembled.warnings).toEqual([expect.stringContaining('lists reference refs/gone.md, which cannot be read')]);
  });

  it('that are missing fail the attempt for good, naming the path', async () => {
    const { spec } = stagesOf('name: p\nstages:\n  - id: spec\n    agent: agents/nope.md\n    prompt: Write it.\n');
    const failure = await failureOf(() => assemblePrompt(options(spec)));
    expect(failure).toMatchObject({ type: 'FILE_NOT_FOUND', nonRetryable: true });
    expect(failure.message).toContain(path.join(baseDir, 'agents/nope.md'));
    expect(failure.message).toContain('stage spec');
  });

  it('with invalid frontmatter fail as CONFIG_INVALID naming the field', async () => {
    await write(baseDir, 'agents/bad.md', '---\nbackend: telepathy\n---\nHi.\n');
    const { spec } = stagesOf('name: p\nstages:\n  - id: spec\n    agent: agents/bad.md\n    prompt: x\n');
    const failure = await failureOf(() => assemblePrompt(options(spec)));
    expect(failure).toMatchObject({ type: 'CONFIG_INVALID', nonRetryable: true });
    expect(failure.message).toMatch(/bad\.md has invalid frontmatter: backend: "telepathy" is not a backend; use claude-cli or anthropic-api/);
  });

  it('fill model, tools and backend only where the stage did not set them (stage > agent > defaults)', () => {
    const stages = stagesOf(
      [
        'name: p',
        'defaults: { model: haiku, allowedTools: [Read] }',
        'stages:',
        '  - id: plain',
        '    prompt: x',
        '  - id: own',
        '    prompt: x',
        '    model: opus',
        '    backend: claude-cli',
        '    allowedTools: [Bash]',
      ].join('\n'),
    );
    const agent = { model: 'sonnet', tools: ['Edit', 'Read'], backend: 'anthropic-api' as const };
    expect(applyAgentDefaults(stages.plain, agent)).toMatchObject({ model: 'sonnet', allowedTools: ['Edit', 'Read'], backend: 'anthropic-api' });
    expect(applyAgentDefaults(stages.own, agent)).toMatchObject({ model: 'opus', allowedTools: ['Bash'], backend: 'claude-cli' });
    expect(applyAgentDefaults(stages.plain, { model: 'inherit' })).toMatchObject({ model: 'haiku' });
  });
});

describe('assemblePrompt', () => {
  it('wraps the rendered step file in the system prompt with run inputs, context files and the output contract', async () => {
    await write(baseDir, 'steps/spec.md', 'Write a spec for {{inputs.feature}} (run {{run.id}}).\n');
    await write(baseDir, 'brief.md', 'We sell umbrellas.\n');
    const { spec } = stagesOf('name: p\nstages:\n  - id: spec\n    description: The product spec\n    prompt: steps/spec.md\n');
    const { prompt } = await assemblePrompt(options(spec, { contextFiles: ['brief.md'] }));
    expect(prompt.user.split('\n')[0]).toBe('Pipeline: demo · Stage: spec · Run: run-7 · Attempt: 1');
    expect(prompt.user).toContain('## Your task\nWrite a spec for dark mode (run run-7).');
    expect(prompt.user).toContain('## Stage requirements\n- The product spec');
    expect(prompt.user).toContain('## Run inputs\n- feature: dark mode');
    expect(prompt.user).toContain('## Project context\n### brief.md\n```\nWe sell umbrellas.\n```');
    expect(prompt.user).toContain(OUTPUT_CONTRACT);
    expect(prompt.system).toBe('');
  });

  it('fails for good with the template and variable named when a variable is unknown', async () => {
    const { spec } = stagesOf('name: p\nstages:\n  - id: spec\n    prompt: |\n      Use {{inputs.colour}}\n      and more.\n');
    const failure = await failureOf(() => assemblePrompt(options(spec)));
    expect(failure).toMatchObject({ type: 'TEMPLATE_VARIABLE_UNKNOWN', nonRetryable: true });
    expect(failure.message).toContain('stage spec prompt (inline) uses {{inputs.colour}}');
  });

  it('lists earlier work as paths for the CLI, which reads files itself', async () => {
    await write(workspaceDir, 'docs/spec.md', '# Spec\n');
    const { build } = stagesOf('name: p\nstages:\n  - id: spec\n    prompt: x\n  - id: build\n    needs: [spec]\n    prompt: Build it.\n    inputs: [docs/spec.md]\n');
    const stages = { spec: { summary: 'Wrote the spec.', outputs: {}, artifacts: ['docs/spec.md'] } };
    const { prompt } = await assemblePrompt(options(build, { context: context({ stages }) }));
    expect(prompt.user).toContain('- Read these input files first (in your working directory): docs/spec.md (written by stage spec)');
    expect(prompt.user).toContain('## Work from earlier stages\n### spec: Wrote the spec.\nFiles (in your working directory): docs/spec.md');
    expect(prompt.user).not.toContain('# Spec');
  });

  it('inlines earlier work for the API backend, with descriptions, and cuts big files with a note', async () => {
    await write(workspaceDir, 'docs/spec.md', 'The spec has ``` fences.\n');
    await write(workspaceDir, 'logs/big.txt', 'x'.repeat(MAX_INLINE_FILE_BYTES + 10));
    const { notes } = stagesOf('name: p\nstages:\n  - id: spec\n    prompt: x\n  - id: notes\n    needs: [spec]\n    backend: anthropic-api\n    prompt: Announce it.\n    inputs: [{ path: docs/spec.md, from: spec }]\n');
    const stages = { spec: { summary: 'Wrote the spec.', outputs: {}, artifacts: ['docs/spec.md', 'logs/big.txt'] } };
    const { prompt } = await assemblePrompt(options(notes, { context: context({ stages }) }));
    // Inlined work goes in a block of its own ahead of the persona, where the API backend can cache it.
    const [work] = prompt.context ?? [];
    expect(work).toContain('## Input files\n### docs/spec.md (written by stage spec)\n````\nThe spec has ``` fences.\n````');
    expect(work).toContain('#### docs/spec.md (shown above)');
    expect(work).toContain(`#### logs/big.txt\n\`\`\`\n${'x'.repeat(100)}`);
    expect(work).toContain(`[cut: showing the first ${MAX_INLINE_FILE_BYTES} of ${MAX_INLINE_FILE_BYTES + 10} bytes]`);
    expect(prompt.user).not.toContain('## Input files');
    expect(prompt.user).toContain('- Read these input files first (shown in your instructions): docs/spec.md');
  });

  it('shows no earlier file that a later stage turned into a symlink, or put under a linked folder, leading out', async () => {
    const outside = await mkdtemp(path.join(tmpdir(), 'prompt-outside-'));
    try {
      await write(outside, '.ssh/id_ed25519', 'WORKER-KEY-4c1f\n');
      await write(workspaceDir, 'kept.md', 'Kept.\n');
      await symlink(path.join(outside, '.ssh', 'id_ed25519'), path.join(workspaceDir, 'notes.md'));
      await symlink(path.join(outside, '.ssh'), path.join(workspaceDir, 'd'));
      await symlink('kept.md', path.join(workspaceDir, 'alias.md'));
      const { notes } = stagesOf('name: p\nstages:\n  - id: a\n    prompt: x\n  - id: notes\n    needs: [a]\n    backend: anthropic-api\n    prompt: Sum up.\n');
      const stages = { a: { summary: 'Wrote notes.', outputs: {}, artifacts: ['notes.md', 'd/id_ed25519', 'alias.md'] } };
      const { prompt } = await assemblePrompt(options(notes, { context: context({ stages }) }));
      const everything = JSON.stringify(prompt);
      expect(everything).not.toContain('WORKER-KEY');
      const [work] = prompt.context ?? [];
      expect(work).toContain('#### notes.md (a symlink leading outside the workspace: not shown)');
      expect(work).toContain('#### d/id_ed25519 (a symlink leading outside the workspace: not shown)');
      // A link inside the workspace is read as its target.
      expect(work).toContain('#### alias.md\n```\nKept.\n```');
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });

  it('carries reviewer feedback from earlier rounds and the previous attempt\'s failure', async () => {
    const { build } = stagesOf('name: p\nstages:\n  - id: build\n    prompt: Build it.\n');
    const { prompt } = await assemblePrompt(
      options(build, {
        context: context({ attempt: 2, previous: { failed: '[AGENT_STALLED] stage build: silent' } }),
        reworkHistory: [{ round: 1, reviewer: 'review', summary: 'Needs tests.', feedback: ['add a test', { file: 'a.js', issue: 'typo' }] }],
      }),
    );
    expect(prompt.user).toContain('## Reviewer feedback from earlier rounds\n### Round 1, reviewer review: Needs tests.\n- add a test\n- {"file":"a.js","issue":"typo"}');
    expect(prompt.user).toContain('## Previous attempt\nThe previous attempt did not succeed: [AGENT_STALLED] stage build: silent');
  });

  describe('declared inputs', () => {
    const yaml = (inputs: string): string => `name: p\nstages:\n  - id: spec\n    prompt: Do it.\n  - id: build\n    needs: [spec]\n    prompt: Do it.\n    inputs: ${inputs}\n`;

    it('missing, name the path and the stage that should have written it', async () => {
      const failure = await failureOf(() => assemblePrompt(options(stagesOf(yaml('[{ path: docs/spec.md, from: spec }]')).build, { context: context({ stages: { spec: { summary: '', outputs: {}, artifacts: [] } } }) })));
      expect(failure).toMatchObject({ type: 'INPUT_NOT_FOUND', nonRetryable: true });
      expect(failure.message).toContain('input docs/spec.md is missing from the workspace');
      expect(failure.message).toContain('stage "spec" should have written it');
    });

    it('missing, name the stage that reported them, or say that none did', async () => {
      const stages = { spec: { summary: '', outputs: {}, artifacts: ['docs/spec.md'] } };
      const reported = await failureOf(() => assemblePrompt(options(stagesOf(yaml('[docs/spec.md]')).build, { context: context({ stages }) })));
      expect(reported.message).toContain('stage "spec" reported it as an artifact, but it is gone');
      const nobody = await failureOf(() => assemblePrompt(options(stagesOf(yaml('[docs/other.md]')).build, { context: context({ stages }) })));
      expect(nobody.message).toContain('no earlier stage reported it');
    });

    it('outside the workspace are rejected, even when the pipeline was not checked by parsePipeline (which rejects them too)', async () => {
      // A run started by another client reaches the worker without our checks: the worker keeps its own.
      const stage = { ...stagesOf(yaml('[docs/spec.md]')).build, inputs: ['../../etc/passwd'] };
      const failure = await failureOf(() => assemblePrompt(options(stage)));
      expect(failure).toMatchObject({ type: 'CONFIG_INVALID', nonRetryable: true });
      expect(failure.message).toContain('input ../../etc/passwd is outside the run\'s workspace');
    });
  });

  describe('a raw prompt\'s inputs', () => {
    it('are checked: a missing one fails INPUT_NOT_FOUND', async () => {
      const { spec } = stagesOf('name: p\nstages:\n  - id: spec\n    promptFormat: raw\n    inputs: [docs/plan.md]\n    prompt: Use the plan.\n');
      const failure = await failureOf(() => assemblePrompt(options(spec)));
      expect(failure).toMatchObject({ type: 'INPUT_NOT_FOUND', nonRetryable: true });
      expect(failure.message).toContain('input docs/plan.md is missing from the workspace');
    });

    it('are placed by {{files}}, each under its path in a fence; a folder is named, a missing optional one left out', async () => {
      await write(workspaceDir, 'docs/plan.md', 'Step one.\n');
      await write(workspaceDir, 'notes/a.txt', 'x');
      await write(workspaceDir, 'code.md', 'Use ```js fences```.');
      const yaml = 'name: p\nstages:\n  - id: spec\n    promptFormat: raw\n    contract: none\n    inputs: [docs/plan.md, notes, code.md, { path: gone.md, optional: true }]\n    prompt: "Files:\\n{{files}}\\nDone."\n';
      const { spec } = stagesOf(yaml);
      const { prompt } = await assemblePrompt(options(spec));
      expect(prompt.user).toBe('Files:\n### docs/plan.md\n```\nStep one.\n```\n\n### notes/ (a folder: its files are in the workspace)\n\n### code.md\n````\nUse ```js fences```.\n````\nDone.');
    });
  });

  describe('a custom system prompt', () => {
    it('replaces the built-in one; without {{output_contract}} the contract moves to the system channel', async () => {
      await write(baseDir, 'system.md', 'House rules apply. Stage {{stage.id}}.\n\n{{stage_prompt}}\n');
      const { spec } = stagesOf('name: p\nsystemPrompt: system.md\nstages:\n  - id: spec\n    prompt: Write it.\n');
      const { prompt } = await assemblePrompt(options(spec, { systemPromptFile: 'system.md' }));
      // As written: the system prompt filled, the stage prompt in it with no heading or section around it.
      expect(prompt.user).toBe('House rules apply. Stage spec.\n\nWrite it.\n');
      expect(prompt.system).toBe(OUTPUT_CONTRACT);
    });

    it('is used as written in raw mode too; a `contract: none` stage gets nothing added', async () => {
      await write(baseDir, 'system.md', 'Bead {{inputs.bead}}.\n\n{{stage_prompt}}\n');
      const { spec } = stagesOf('name: p\ninputs: { bead: {} }\nsystemPrompt: system.md\ndefaults: { promptFormat: raw, contract: none }\nstages:\n  - id: spec\n    prompt: "Write {{stage.id}}."\n');
      const { prompt } = await assemblePrompt(options(spec, { systemPromptFile: 'system.md', context: { ...context(), inputs: { bead: 'B-1' } } }));
      expect(prompt).toEqual({ system: '', user: 'Bead B-1.\n\nWrite spec.\n' });
    });

    it('without {{stage_prompt}} is a configuration error', async () => {
      await write(baseDir, 'system.md', 'House rules apply.\n');
      const { spec } = stagesOf('name: p\nstages:\n  - id: spec\n    prompt: Write it.\n');
      const failure = await failureOf(() => assemblePrompt(options(spec, { systemPromptFile: 'system.md' })));
      expect(failure).toMatchObject({ type: 'CONFIG_INVALID', nonRetryable: true });
      expect(failure.message).toContain('has no {{stage_prompt}} placeholder');
    });
  });
});

describe('composePrompt', () => {
  it('puts persona and the stage\'s appendSystemPrompt in the system channel, and asks an agent-only stage to follow its instructions', () => {
    const { spec } = stagesOf('name: p\nstages:\n  - id: spec\n    agent: a.md\n    appendSystemPrompt: Be brief.\n');
    const prompt = composePrompt({
      stage: spec,
      context: context(),
      task: '',
      persona: 'You are a PM.',
      agentDescription: 'Writes specs',
      systemPrompt: { text: DEFAULT_SYSTEM_PROMPT, name: 'built-in' },
      projectContext: [],
      inputs: [],
      earlier: [],
      inline: false,
      maxBudgetUsd: 1.5,
    });
    expect(prompt.system).toBe('You are a PM.\n\nBe brief.');
    expect(prompt.user).toContain('## Your task\nDo the work your instructions describe (Writes specs).');
    expect(prompt.user).toContain('- Spend at most $1.50 on this stage.');
  });

  it('shows binary and left-out files by name only', () => {
    expect(formatFile({ path: 'a.png', excerpt: { text: '', bytes: 10, cut: false, binary: true } }, '###')).toBe('### a.png\n[binary file, 10 bytes, not shown]');
    expect(formatFile({ path: 'b.md', omitted: true }, '###')).toContain('size bound was reached');
  });
});

describe('appendSystemPrompt', () => {
  it('may be set in defaults, and is filled like the prompt before it reaches the system channel', async () => {
    const { spec } = stagesOf('name: p\ninputs: { feature: {} }\ndefaults: { appendSystemPrompt: "Elicit {{inputs.feature}} for {{stage.id}}." }\nstages:\n  - id: spec\n    prompt: Write it.\n');
    const assembled = await assemblePrompt(options(spec));
    expect(assembled.prompt.system).toContain('Elicit dark mode for spec.');
    expect(assembled.prompt.system).not.toContain('{{');
  });

  it('with a variable the run does not define fails the attempt as TEMPLATE_VARIABLE_UNKNOWN', async () => {
    const { spec } = stagesOf('name: p\nstages:\n  - id: spec\n    appendSystemPrompt: "Use {{inputs.nope}}."\n    prompt: Write it.\n');
    const failure = await failureOf(() => assemblePrompt(options(spec)));
    expect(failure).toMatchObject({ type: 'TEMPLATE_VARIABLE_UNKNOWN', nonRetryable: true });
    expect(failure.message).toContain('{{inputs.nope}}');
  });
});
