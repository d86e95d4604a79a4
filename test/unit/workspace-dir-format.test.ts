import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { composeRawPrompt } from '../../src/activities/prompt/raw-prompt.js';
import { OUTPUT_CONTRACT } from '../../src/activities/prompt/system-prompt.js';
import { validatePipeline } from '../../src/library/validate-pipeline.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';

/* What the pipeline file allows of `workspace.dir` and `promptFormat: raw`, and the raw prompt's parts. */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'workspace-dir-format-'));
  await mkdir(path.join(dir, 'shared'), { recursive: true });
  await writeFile(path.join(dir, 'repo-file'), '');
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

const problemsOf = (workspace: string, stage = '{ id: a, prompt: x }'): string[] => {
  try {
    parsePipeline(`name: p\nworkspace: ${workspace}\nstages:\n  - ${stage}\n`, 'p.yaml');
    return [];
  } catch (err) {
    return (err as { problems: { field?: string; path?: PropertyKey[]; message: string }[] }).problems.map((p) => p.message);
  }
};

describe('workspace.dir in the pipeline file', () => {
  test('is a repository or a folder, never both, never neither', () => {
    expect(problemsOf('{ dir: shared }')).toEqual([]);
    expect(problemsOf('{ repo: ., dir: shared }').join()).toContain('give either `repo` or `dir`, not both');
    expect(problemsOf('{ }').join()).toContain('workspace needs `repo`');
  });

  test('refuses what only a worktree of its own allows: branch, push, pull request, keep, commits', () => {
    const problems = problemsOf('{ dir: shared, branch: b, push: { remote: origin }, keep: never }', '{ id: a, prompt: x, commit: true }');
    expect(problems.filter((p) => p.includes('needs `workspace.repo`'))).toHaveLength(4);
    expect(problems.join()).toContain('`commit: true` needs `workspace.repo`; the worker does not commit in a folder it was lent');
  });

  test('validate checks a plain folder exists and a template uses only what is known at the start', async () => {
    const missing = await validatePipeline({ name: 'p', workspace: { dir: 'nowhere' }, stages: [{ id: 'a', prompt: 'x' }] }, { baseDir: dir });
    expect(missing.problems.map((p) => p.message).join()).toContain(`folder ${path.join(dir, 'nowhere')} does not exist`);
    const templated = await validatePipeline(
      { name: 'p', inputs: { worktree: {} }, workspace: { dir: '{{inputs.worktree}}/{{stages.a.summary}}' }, context: [{ path: 'ctx.md', from: 'workspace' }], stages: [{ id: 'a', prompt: 'Do the work.' }] },
      { baseDir: dir },
    );
    // The context file is read from the workspace at run time: not looked for in the pipeline's folder.
    expect(templated.problems.map((p) => p.message)).toEqual(['{{stages.a.summary}} is not known when the run starts; use run.id, run.pipeline or a declared input']);
  });
});

describe('promptFormat: raw', () => {
  const pipeline = parsePipeline('name: p\ndefaults: { promptFormat: raw }\nstages:\n  - { id: a, prompt: x, contract: none }\n  - { id: b, prompt: x, promptFormat: wrapped }\n  - { id: c, prompt: x, appendSystemPrompt: "Run {{run.id}}." }\n', 'p.yaml');
  const context = { inputs: {}, stages: {}, run: { id: 'r1', pipeline: 'p' }, attempt: 1 };
  const [a, b, c] = pipeline.stages.map((s) => resolveStage(pipeline, s));

  test('is set in defaults or per stage', () => {
    expect([a.promptFormat, b.promptFormat, c.promptFormat]).toEqual(['raw', 'wrapped', 'raw']);
  });

  test('sends the prompt untouched; the system prompt is the persona, plus appendSystemPrompt and the contract when asked', () => {
    const task = '  ## Task\n\n\nas written  \n';
    expect(composeRawPrompt({ stage: a, context, task, persona: 'Persona.\n\n## Reference: r.md\n\nRef.' })).toEqual({ system: 'Persona.\n\n## Reference: r.md\n\nRef.', user: task });
    expect(composeRawPrompt({ stage: a, context, task })).toEqual({ system: '', user: task });
    expect(composeRawPrompt({ stage: c, context, task, persona: 'Persona.' })).toEqual({ system: `Persona.\n\nRun r1.\n\n${OUTPUT_CONTRACT}`, user: task });
  });

  test('an agent started ahead of time gets the system prompt the raw attempt will send', async () => {
    await writeFile(path.join(dir, 'agent.md'), '---\nname: w\n---\nPersona.\n');
    const { prewarmTargets } = await import('../../src/activities/prompt/prewarm-targets.js');
    const raw = parsePipeline('name: p\nstages:\n  - { id: a, agent: agent.md, prompt: x, promptFormat: raw }\n  - { id: b, agent: agent.md, prompt: x, promptFormat: raw, contract: none }\n', 'p.yaml');
    const targets = await prewarmTargets(raw.stages.map((st) => resolveStage(raw, st)), { baseDir: dir, resolveAddDirs: () => undefined });
    expect(targets.map((t) => t.system)).toEqual([`Persona.\n\n${OUTPUT_CONTRACT}`, 'Persona.']);
  });

  test('validate notes what a raw stage gives up, and more without a report', async () => {
    const report = await validatePipeline({ name: 'p', stages: [{ id: 'free', prompt: 'x', promptFormat: 'raw', contract: 'none' }, { id: 'json', prompt: 'x', promptFormat: 'raw' }, { id: 'plain', prompt: 'x' }] }, { baseDir: dir });
    const notes = report.notes.filter((n) => n.message.startsWith('promptFormat: raw'));
    expect(notes.map((n) => n.field)).toEqual(['stages[0].promptFormat', 'stages[1].promptFormat']);
    expect(notes[0].message).toContain('not told it may ask a person');
    expect(notes[1].message).toContain('the output contract (the report block, and `BLOCKED:` for a question) is added to the system prompt');
  });
});
