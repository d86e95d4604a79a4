import { execa } from 'execa';
import { mkdir, mkdtemp, readFile, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { assemblePrompt } from '../../src/activities/prompt/stage-prompt.js';
import { readPipelineFile } from '../../src/activities/prompt/pipeline-file.js';
import { unpackRunBundle } from '../../src/activities/prompt/run-bundle-files.js';
import { createRunBundle } from '../../src/bundle/create-run-bundle.js';
import { hashManifest } from '../../src/bundle/manifest-hash.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';

/*
 * Issue 19, reproduction 4: a run read any file of the worker's host. `../` paths and symlinks reached /etc/passwd,
 * a crafted bundle named a folder outside itself, the client bundler carried files from outside the pipeline's folder
 * into history, and reads were unbounded (a 64 MB reference became the persona; a device or FIFO never ends).
 */

let base: string;
let pipelineDir: string;
let workspaceDir: string;
beforeEach(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'pipeline-files-'));
  pipelineDir = path.join(base, 'pipeline');
  workspaceDir = path.join(base, 'workspace');
  await mkdir(pipelineDir);
  await mkdir(workspaceDir);
  await writeFile(path.join(base, 'secret.txt'), 'SECRET-OF-THE-HOST');
});
afterEach(async () => rm(base, { recursive: true, force: true }));

const write = async (relative: string, text: string): Promise<void> => {
  await mkdir(path.dirname(path.join(pipelineDir, relative)), { recursive: true });
  await writeFile(path.join(pipelineDir, relative), text);
};

/** Builds the prompt of the first stage of `yaml` as a worker does, from `pipelineDir`; resolves to its text or the failure. */
async function promptOf(yaml: string): Promise<string> {
  const pipeline = parsePipeline(yaml, 'p.yaml');
  const stage = resolveStage(pipeline, pipeline.stages[0]);
  const assembled = await assemblePrompt({
    stage,
    baseDir: pipelineDir,
    workspaceDir,
    context: { inputs: {}, stages: {}, run: { id: 'r', pipeline: 'p' }, attempt: 1, previous: { failed: '' } },
    contextFiles: pipeline.context,
    systemPromptFile: pipeline.systemPrompt,
  });
  return JSON.stringify(assembled.prompt);
}
const failureOf = (promise: Promise<unknown>) => promise.then(() => ({ type: 'none', message: '' }), (err: { type?: string; message: string }) => err);

describe('validate', () => {
  it('refuses agent, prompt and system prompt files and promptsDir that leave the pipeline\'s folder', () => {
    const problems = pipelineProblems(
      'name: p\nsystemPrompt: ../../etc/motd\npromptsDir: ../prompts\nstages:\n  - { id: a, agent: ../../../etc/passwd, prompt: hi }\n  - { id: b, prompt: ../steps/x.md }\n',
    ).join('\n');
    expect(problems).toContain('systemPrompt: "../../etc/motd" leaves the pipeline file\'s folder');
    expect(problems).toContain('promptsDir: "../prompts" leaves the pipeline file\'s folder');
    expect(problems).toContain('stages[0].agent: "../../../etc/passwd" leaves the pipeline file\'s folder');
  });
});

describe('the worker', () => {
  it('refuses a pipeline file that names a path outside its folder', async () => {
    const failure = await failureOf(readPipelineFile(pipelineDir, '../secret.txt', 'a', 'agent'));
    expect(failure.type).toBe('CONFIG_INVALID');
    expect(failure.message).toContain('outside the pipeline\'s folder');
  });

  it('refuses a context file that is a symlink leading out of the pipeline\'s folder', async () => {
    await symlink(path.join(base, 'secret.txt'), path.join(pipelineDir, 'brief.md'));
    const failure = await failureOf(promptOf('name: p\ncontext: [brief.md]\nstages: [{ id: a, prompt: Write the notes., backend: anthropic-api }]\n'));
    expect(failure.message).not.toContain('SECRET-OF-THE-HOST');
    expect(failure.type).toBe('CONFIG_INVALID');
    expect(failure.message).toMatch(/brief\.md is outside the pipeline's folder .* \(it leads to .*secret\.txt\)/);
  });

  it('refuses an agent reference above the size cap, naming the file, its size and the cap', async () => {
    await write('agents/a.md', '---\nname: a\nreferences: [huge.md]\n---\nYou write.\n');
    await writeFile(path.join(pipelineDir, 'agents/huge.md'), '');
    await truncate(path.join(pipelineDir, 'agents/huge.md'), 64 * 1024 * 1024);
    const failure = await failureOf(promptOf('name: p\nstages: [{ id: a, agent: agents/a.md, prompt: Write the notes. }]\n'));
    expect(failure.type).toBe('CONFIG_INVALID');
    expect(failure.message).toContain(`${path.join(pipelineDir, 'agents/huge.md')} is 67108864 bytes, more than the cap of 1048576 bytes`);
  });

  it('refuses a pipeline file that is not a regular file (a FIFO would never end)', async () => {
    await execa('mkfifo', [path.join(pipelineDir, 'system.md')]);
    const failure = await failureOf(readPipelineFile(pipelineDir, 'system.md', 'a', 'systemPrompt'));
    expect(failure.type).toBe('CONFIG_INVALID');
    expect(failure.message).toContain('is not a regular file');
  }, 10_000);

  it('refuses a bundle whose pipelineDir lies outside it', async () => {
    const files = { 'pipeline.yaml': 'a'.repeat(64) };
    for (const dir of ['/etc', '../../../../../../etc']) {
      const hash = hashManifest(dir, files);
      const bundle = { hash, pipelineDir: dir, files, blobs: { ['a'.repeat(64)]: { encoding: 'utf8' as const, data: 'x' } } };
      const failure = await failureOf(unpackRunBundle(bundle, path.join(base, 'cache', hash), hash, 'a'));
      expect(failure.type, dir).toBe('BUNDLE_INVALID');
      expect(failure.message, dir).toContain('names a pipeline folder outside itself');
    }
  });
});

describe('the client bundler', () => {
  it('refuses a file outside the pipeline\'s folder, by path or by symlink, before anything reaches history', async () => {
    const file = path.join(pipelineDir, 'pipeline.yaml');
    await write('pipeline.yaml', 'name: p\nstages: [{ id: a, prompt: hi }]\n');
    const bundleOf = (yaml: string) => createRunBundle(file, { ...parsePipeline('name: p\nstages: [{ id: a, prompt: hi }]\n', file), ...(JSON.parse(yaml) as object) });
    await expect(bundleOf('{"systemPrompt": "../secret.txt"}')).rejects.toMatchObject({ code: 'PATH_OUTSIDE' });
    await symlink(path.join(base, 'secret.txt'), path.join(pipelineDir, 'notes.md'));
    const error = await bundleOf('{"context": ["notes.md"]}').catch((err: unknown) => err as Error);
    expect(error).toMatchObject({ code: 'PATH_OUTSIDE' });
    expect(String((error as Error).message)).toContain('a symlink to');
    expect(await readFile(path.join(base, 'secret.txt'), 'utf8')).toBe('SECRET-OF-THE-HOST');
  });
});
