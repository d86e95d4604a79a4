import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findMissingExpected, missingFilesMessage } from '../../src/activities/outputs/expected-files.js';
import { assemblePrompt } from '../../src/activities/prompt/stage-prompt.js';
import { looksLikePromptFile, resolvePromptSource } from '../../src/activities/prompt/prompt-source.js';
import { promptCandidates } from '../../src/pipeline/prompt-names.js';
import { resolveOutputPath } from '../../src/activities/outputs/stage-outputs.js';
import { validatePipelineFile } from '../../src/library/validate-pipeline.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { resolveStage, type ResolvedStage } from '../../src/pipeline/stage-options.js';
import type { TemplateContext } from '../../src/pipeline/template.js';

/*
 * The file side of issue 12's fields: prompts looked up by name (`promptsDir`), optional context and inputs,
 * the free-form contract's instructions, `expects`, the API answer's `output` path, and what `validate` says.
 */

let baseDir: string;
let workspaceDir: string;
beforeEach(async () => {
  baseDir = await mkdtemp(path.join(tmpdir(), 'seed-base-'));
  workspaceDir = await mkdtemp(path.join(tmpdir(), 'seed-ws-'));
});
afterEach(async () => {
  await rm(baseDir, { recursive: true, force: true });
  await rm(workspaceDir, { recursive: true, force: true });
});

const write = async (dir: string, file: string, text: string): Promise<void> => {
  await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
  await writeFile(path.join(dir, file), text);
};

const context: TemplateContext = { inputs: { squad: 'growth', bead: 'B-7' }, stages: {}, run: { id: 'run-1', pipeline: 'p' }, attempt: 1, previous: { failed: '' } };

function stageOf(yaml: string, id = 'a'): ResolvedStage {
  const pipeline = parsePipeline(yaml, 'p.yaml');
  return resolveStage(pipeline, pipeline.stages.find((s) => s.id === id)!);
}

async function failureOf(fn: () => Promise<unknown>): Promise<{ type?: string; message: string }> {
  try {
    await fn();
  } catch (err) {
    return err as { type?: string; message: string };
  }
  throw new Error('expected a failure');
}

describe('prompt sources', () => {
  it('tell file names from text', () => {
    expect(['implement', 'spells/fix', 'steps/spec.md'].map(looksLikePromptFile)).toEqual([true, true, true]);
    expect(['Summarize.', 'Write the plan', 'line one\nline two'].map(looksLikePromptFile)).toEqual([false, false, false]);
  });

  it('list the files a name may stand for, in lookup order, without touching the disk', () => {
    expect(promptCandidates('implement', 'spells/')).toEqual([
      'spells/implement', 'spells/implement.md', 'spells/implement.txt', 'spells/implement.prompt',
      'implement', 'implement.md', 'implement.txt', 'implement.prompt',
    ]);
    expect(promptCandidates('steps/spec.md')).toEqual(['steps/spec.md']);
    expect(promptCandidates('Write the spec.')).toEqual([]);
  });

  it('look bare names up in promptsDir first, then beside the pipeline file, with .md added', async () => {
    await write(baseDir, 'spells/implement.md', 'Implement {{inputs.bead}}.');
    await write(baseDir, 'review.md', 'Review.');
    expect(resolvePromptSource(baseDir, 'implement', 'spells')).toEqual({ kind: 'file', relative: 'spells/implement.md' });
    expect(resolvePromptSource(baseDir, 'review', 'spells')).toEqual({ kind: 'file', relative: 'review.md' });
    expect(resolvePromptSource(baseDir, 'spells/implement')).toEqual({ kind: 'file', relative: 'spells/implement.md' });
    expect(resolvePromptSource(baseDir, 'Implement it now.')).toEqual({ kind: 'inline' });
    const missing = resolvePromptSource(baseDir, 'spells/fix');
    expect(missing.kind === 'missing' && missing.tried).toContain(path.join(baseDir, 'spells/fix.md'));
  });

  it('a name that matches no file fails the stage instead of being sent as the prompt', async () => {
    const failure = await failureOf(() => assemblePrompt({ stage: stageOf('name: p\nstages:\n  - id: a\n    prompt: implement\n'), baseDir, workspaceDir, context }));
    expect(failure.type).toBe('FILE_NOT_FOUND');
    expect(failure.message).toContain('prompt "implement" looks like a file name but matches no file');
  });

  it('a promptsDir spell is rendered as the task', async () => {
    await write(baseDir, 'spells/implement.md', 'Implement bead {{inputs.bead}} for {{project_name}}.');
    const stage = stageOf('name: p\ntemplateSyntax: passthrough\npromptsDir: spells\nstages:\n  - id: a\n    prompt: implement\n');
    const { prompt } = await assemblePrompt({ stage, baseDir, workspaceDir, context, promptsDir: 'spells' });
    expect(prompt.user).toContain('## Your task\nImplement bead B-7 for {{project_name}}.');
  });
});

describe('optional files and the free-form contract in the prompt', () => {
  it('a missing optional context file or input is a note; a present one is shown', async () => {
    await write(baseDir, 'brief.md', 'We sell umbrellas.\n');
    const stage = stageOf('name: p\nstages:\n  - id: a\n    backend: anthropic-api\n    prompt: Write it.\n    inputs: [{ path: docs/research.md, optional: true }]\n');
    const { prompt } = await assemblePrompt({
      stage,
      baseDir,
      workspaceDir,
      context,
      contextFiles: ['brief.md', { path: 'context/product-marketing-context.md', optional: true }],
    });
    expect(prompt.user).toContain(
      '## Notes\n- The optional input file docs/research.md does not exist in the workspace; work without it.\n' +
        '- The optional context file context/product-marketing-context.md does not exist; no such context is available, so work without it.',
    );
    // An API stage sends context files as a system block of their own (for the prompt cache), not in the user message.
    expect(prompt.context?.join('\n')).toContain('### brief.md\n```\nWe sell umbrellas.\n```');
  });

  it('a missing required context file still fails', async () => {
    const failure = await failureOf(() => assemblePrompt({ stage: stageOf('name: p\nstages:\n  - id: a\n    prompt: Write it.\n'), baseDir, workspaceDir, context, contextFiles: ['nope.md'] }));
    expect(failure.type).toBe('FILE_NOT_FOUND');
  });

  it('contract: none asks for the deliverable, not for a report block', async () => {
    const { prompt } = await assemblePrompt({ stage: stageOf('name: p\nstages:\n  - id: a\n    contract: none\n    prompt: Write it.\n'), baseDir, workspaceDir, context });
    expect(prompt.user).toContain('Your answer is the deliverable: give it in full, with no report block.');
    expect(prompt.user).not.toContain('"success": true');
    const json = await assemblePrompt({ stage: stageOf('name: p\nstages:\n  - id: a\n    prompt: Write it.\n'), baseDir, workspaceDir, context });
    expect(json.prompt.user).toContain('"success": true');
  });
});

describe('expects and output', () => {
  it('lists the expected paths and globs that match nothing', async () => {
    await write(workspaceDir, 'docs/spec.md', '# Spec');
    await write(workspaceDir, 'src/a.ts', '');
    expect(await findMissingExpected(workspaceDir, ['docs/spec.md', 'src/*.ts', 'docs/plan.md', 'test/**/*.test.ts'])).toEqual(['docs/plan.md', 'test/**/*.test.ts']);
    await expect(findMissingExpected(workspaceDir, ['../outside.md'])).rejects.toThrow(/outside the run's workspace/);
    expect(missingFilesMessage(['docs/plan.md'])).toMatch(/^You did not write `docs\/plan\.md`/);
  });

  it('renders the output path, by default outputs/<stage>.md, and keeps it inside the workspace', () => {
    const yaml = (output: string): string => `name: p\ninputs: { squad: {} }\nstages:\n  - id: a\n    backend: anthropic-api\n    prompt: Write it.\n${output}`;
    expect(resolveOutputPath(stageOf(yaml('')), context, workspaceDir)).toBe('outputs/a.md');
    expect(resolveOutputPath(stageOf(yaml('    output: "outputs/{{inputs.squad}}/{{stage.id}}.md"\n')), context, workspaceDir)).toBe('outputs/growth/a.md');
    // The file's text stays inside (checked at load); what an input fills in is checked when the path is rendered.
    const escaping = { ...context, inputs: { squad: '../..' } };
    expect(() => resolveOutputPath(stageOf(yaml('    output: "{{inputs.squad}}/escape.md"\n')), escaping, workspaceDir)).toThrow(/not a file inside the run's workspace/);
  });
});

describe('validate', () => {
  it('reports a prompt name that matches no file, and notes passed-through names and absent optional files', async () => {
    await write(baseDir, 'steps/create-story.md', 'Story for {{project_name}} by {{user_name}}, feature {{inputs.feature}}.\n');
    const file = path.join(baseDir, 'p.yaml');
    await write(
      baseDir,
      'p.yaml',
      [
        'name: p',
        'inputs: { feature: {} }',
        'templateSyntax: passthrough',
        'context: [{ path: context/product.md, optional: true }]',
        'stages:',
        '  - id: story',
        '    prompt: steps/create-story.md',
        '  - id: fix',
        '    prompt: spells/fix',
        '    output: out/fix.md',
      ].join('\n'),
    );
    const report = await validatePipelineFile(file);
    expect(report.problems.map((p) => `${p.field}: ${p.message}`)).toEqual([expect.stringMatching(/^stages\[1\]\.prompt: prompt "spells\/fix" looks like a file name but matches no file/)]);
    expect(report.notes.map((n) => `${n.field}: ${n.message}`)).toEqual([
      `context[0]: context file ${path.join(baseDir, 'context/product.md')} does not exist (optional: stages get a note instead)`,
      'stages[1].output: output: applies to anthropic-api stages; a claude-cli agent writes its own files (list them under expects:)',
      // The pipeline file's notes, then those of the step file it names.
      'stages[0].prompt {{project_name}}: passed to the agent as written (templateSyntax: passthrough)',
      'stages[0].prompt {{user_name}}: passed to the agent as written (templateSyntax: passthrough)',
    ]);
  });

  it('notes the fields a stage sets that its backend ignores, and nothing on defaults, agent-chosen or custom backends', async () => {
    await write(baseDir, 'agents/writer.md', '---\nname: writer\nbackend: anthropic-api\n---\nYou write.\n');
    const file = path.join(baseDir, 'p.yaml');
    await write(
      baseDir,
      'p.yaml',
      [
        'name: p',
        'defaults: { maxTokens: 2000, allowedTools: [Read] }',
        'stages:',
        '  - { id: cli, prompt: Do it., maxTokens: 100, maxContinuations: 1, cache: false }',
        '  - { id: api, prompt: Do it., backend: anthropic-api, allowedTools: [Bash], permissionMode: plan, bare: true, sandbox: { autoAllowBash: true } }',
        '  - { id: agent, agent: agents/writer.md, maxTokens: 100 }',
        '  - { id: both, prompt: Do it., backend: anthropic-api, maxTokens: 100 }',
      ].join('\n'),
    );
    const report = await validatePipelineFile(file);
    expect(report.problems).toEqual([]);
    const apiOnly = (f: string) => `4 stages[0].${f}: ${f}: applies to anthropic-api stages; stage "cli" runs on claude-cli, which ignores it (remove it, or set \`backend: anthropic-api\`)`;
    const cliOnly = (f: string) => `5 stages[1].${f}: ${f}: applies to claude-cli stages; stage "api" runs on anthropic-api, which ignores it (remove it, or set \`backend: claude-cli\`)`;
    // In file order: by line, then column.
    expect(report.notes.map((n) => `${n.line} ${n.field}: ${n.message}`)).toEqual([
      ...['maxTokens', 'maxContinuations', 'cache'].map(apiOnly),
      ...['allowedTools', 'permissionMode', 'bare', 'sandbox'].map(cliOnly),
    ]);
    // A backend of the workers' own may read any field.
    await write(baseDir, 'p.yaml', ['name: p', 'stages:', '  - { id: echo, prompt: Do it., backend: echo, maxTokens: 100, allowedTools: [Bash] }'].join('\n'));
    expect((await validatePipelineFile(file, { backends: ['echo'] })).notes).toEqual([]);
  });

  it('knows status, error, run.status and promptsDir', async () => {
    await write(baseDir, 'spells/fix.md', 'Fix what {{stages.test.status}} said: {{stages.test.error}}.\n');
    await write(
      baseDir,
      'p.yaml',
      [
        'name: p',
        'promptsDir: spells',
        'stages:',
        '  - id: test',
        '    continueOnFailure: true',
        '    prompt: Run the tests.',
        '  - id: fix',
        '    needs: [{ stage: test, allowFailure: true }]',
        '    prompt: fix',
        'finally:',
        '  - id: record',
        '    prompt: "Record {{run.status}} ({{run.error}}) after {{stages.fix.summary}}."',
      ].join('\n'),
    );
    const report = await validatePipelineFile(path.join(baseDir, 'p.yaml'));
    expect(report.problems).toEqual([]);
    expect(report.notes).toEqual([]);
  });
});
