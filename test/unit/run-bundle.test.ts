import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { unpackRunBundle, verifyUnpackedBundle } from '../../src/activities/prompt/run-bundle-files.js';
import { BundleTooLargeError, createRunBundle, summarizeBundle } from '../../src/bundle/create-run-bundle.js';
import { InvalidRequestError } from '../../src/errors.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { listReferencedFiles } from '../../src/pipeline/referenced-files.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'run-bundle-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes files (path → text) under the test folder. */
async function writeTree(files: Record<string, string>): Promise<void> {
  for (const [relative, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, relative)), { recursive: true });
    await writeFile(path.join(dir, relative), text);
  }
}

const PIPELINE = `name: carry
context: [brief.md]
systemPrompt: shared/system.md
stages:
  - id: one
    agent: agents/writer.md
    prompt: steps/one.md
  - id: two
    agent: agents/writer.md
    prompt: Inline {{inputs.x}} text, not a file.
  - id: three
    prompt: steps/copy.md
`;

async function bundleOf(file: string, maxBytes?: number) {
  return createRunBundle(file, parsePipeline(await readFile(file, 'utf8'), file), { maxBytes });
}

describe('run bundles', () => {
  test('list every file the pipeline names, once per field, and no inline prompt', () => {
    const refs = listReferencedFiles(parsePipeline(PIPELINE, 'p.yaml'));
    expect(refs.map((r) => [r.field, r.path])).toEqual([
      ['systemPrompt', 'shared/system.md'],
      ['context[0]', 'brief.md'],
      ['stages[0].agent', 'agents/writer.md'],
      ['stages[0].prompt', 'steps/one.md'],
      ['stages[1].agent', 'agents/writer.md'],
      ['stages[2].prompt', 'steps/copy.md'],
    ]);
  });

  test('carry the pipeline file, agent files with their references, steps, context and system prompt, each content once', async () => {
    await writeTree({
      'p/pipeline.yaml': PIPELINE,
      'p/shared/system.md': 'Stage: {{stage.id}}\n{{stage_prompt}}',
      'p/agents/writer.md': '---\nname: writer\nreferences: [../refs/style.md, missing.md]\n---\nYou write.',
      'p/refs/style.md': 'Be brief.',
      'p/steps/one.md': 'Same text',
      'p/steps/copy.md': 'Same text',
      'p/brief.md': 'The brief.',
    });
    const bundle = await bundleOf(path.join(dir, 'p/pipeline.yaml'));
    // Every file is in the pipeline file's folder, which is the bundle's root.
    expect(bundle.pipelineDir).toBe('');
    expect(Object.keys(bundle.files).sort()).toEqual([
      'agents/writer.md', 'brief.md', 'pipeline.yaml', 'refs/style.md', 'shared/system.md', 'steps/copy.md', 'steps/one.md',
    ]);
    expect(bundle.files['steps/one.md']).toBe(bundle.files['steps/copy.md']);
    expect(Object.keys(bundle.blobs)).toHaveLength(6);
    expect(summarizeBundle(bundle)).toMatchObject({ hash: bundle.hash, files: 7 });

    // The same files give the same hash; one changed byte gives another.
    expect((await bundleOf(path.join(dir, 'p/pipeline.yaml'))).hash).toBe(bundle.hash);
    await writeFile(path.join(dir, 'p/refs/style.md'), 'Be brief!');
    expect((await bundleOf(path.join(dir, 'p/pipeline.yaml'))).hash).not.toBe(bundle.hash);
  });

  test('a worker unpacks the bundle where the pipeline folder was, byte for byte, binary files included', async () => {
    await writeTree({ 'p/pipeline.yaml': 'name: bin\ncontext: [data.bin]\nstages: [{ id: a, prompt: hi }]\n' });
    const binary = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x41]);
    await writeFile(path.join(dir, 'p/data.bin'), binary);
    const bundle = await bundleOf(path.join(dir, 'p/pipeline.yaml'));
    const target = path.join(dir, 'cache', bundle.hash);
    await unpackRunBundle(bundle, target, bundle.hash, 'a');
    expect(await readFile(path.join(target, 'files', bundle.pipelineDir, 'data.bin'))).toEqual(binary);
    expect(await readFile(path.join(target, 'files', bundle.pipelineDir, 'pipeline.yaml'), 'utf8')).toContain('name: bin');
  });

  test('a cached bundle is used only while every file matches its hash: changed, added, removed or linked files are caught (issue 33)', async () => {
    await writeTree({ 'p/pipeline.yaml': 'name: t\nstages: [{ id: a, prompt: steps/a.md }]\n', 'p/steps/a.md': 'original' });
    const bundle = await bundleOf(path.join(dir, 'p/pipeline.yaml'));
    const target = path.join(dir, 'cache', bundle.hash);
    await unpackRunBundle(bundle, target, bundle.hash, 'a');
    expect(await verifyUnpackedBundle(target, bundle.hash)).toMatchObject({ pipelineDir: bundle.pipelineDir, files: bundle.files });
    const step = path.join(target, 'files', bundle.pipelineDir, 'steps', 'a.md');
    const tamperings: [string, () => Promise<unknown>, () => Promise<unknown>][] = [
      ['changed', () => writeFile(step, 'injected'), () => writeFile(step, 'original')],
      ['added', () => writeFile(path.join(path.dirname(step), 'extra.md'), 'x'), () => rm(path.join(path.dirname(step), 'extra.md'))],
      ['removed', () => rm(step), () => writeFile(step, 'original')],
      ['linked', async () => {
        await writeFile(path.join(dir, 'same.md'), 'original');
        await rm(step);
        await symlink(path.join(dir, 'same.md'), step);
      }, async () => {
        await rm(step);
        await writeFile(step, 'original');
      }],
      ['manifest edited to match', () => writeFile(path.join(target, '.complete'), JSON.stringify({ pipelineDir: bundle.pipelineDir, files: { ...bundle.files, 'steps/a.md': createHash('sha256').update('injected').digest('hex') } })), () => unpackRunBundle(bundle, target, bundle.hash, 'a')],
    ];
    for (const [what, tamper, restore] of tamperings) {
      await tamper();
      expect(await verifyUnpackedBundle(target, bundle.hash), what).toBeUndefined();
      await restore();
    }
    // Unpacking again over a copy that does not match replaces it.
    await writeFile(step, 'injected');
    await unpackRunBundle(bundle, target, bundle.hash, 'a');
    expect(await readFile(step, 'utf8')).toBe('original');
    expect(await verifyUnpackedBundle(target, bundle.hash)).toBeDefined();
  });

  test('a worker refuses a bundle whose content does not match its hash', async () => {
    await writeTree({ 'p/pipeline.yaml': 'name: t\nstages: [{ id: a, prompt: steps/a.md }]\n', 'p/steps/a.md': 'original' });
    const bundle = await bundleOf(path.join(dir, 'p/pipeline.yaml'));
    const sha = bundle.files['steps/a.md'];
    const tampered = { ...bundle, blobs: { ...bundle.blobs, [sha]: { encoding: 'utf8' as const, data: 'tampered' } } };
    await expect(unpackRunBundle(tampered, path.join(dir, 'cache', bundle.hash), bundle.hash, 'a')).rejects.toMatchObject({
      type: 'BUNDLE_INVALID',
      message: expect.stringContaining('steps/a.md that does not match its hash'),
    });
  });

  test('a missing file fails at start naming the field and the path; a missing agent reference is left to the worker to warn about', async () => {
    await writeTree({ 'p/pipeline.yaml': 'name: t\ncontext: [brief.md]\nstages: [{ id: a, prompt: hi }]\n' });
    const error = await bundleOf(path.join(dir, 'p/pipeline.yaml')).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect(error).toMatchObject({ code: 'FILE_NOT_FOUND' });
    expect((error as Error).message).toBe(
      `[FILE_NOT_FOUND] cannot bundle ${path.join(dir, 'p/brief.md')} (\`context[0]\` in ${path.join(dir, 'p/pipeline.yaml')}): ENOENT; fix the path, or start with --files-from-worker (the library: \`filesFromWorker: true\`) if the workers have the file`,
    );
  });

  test('an absolute path fails at start: a place on the client means nothing on another host', async () => {
    // `validate` refuses it too (it leaves the pipeline's folder); the bundler says why it cannot be carried.
    await writeTree({ 'p/pipeline.yaml': 'name: t\nstages: [{ id: a, prompt: hi }]\n' });
    const file = path.join(dir, 'p/pipeline.yaml');
    const pipeline = { ...parsePipeline(await readFile(file, 'utf8'), file), systemPrompt: path.join(dir, 'sys.md') };
    await expect(createRunBundle(file, pipeline)).rejects.toThrow(/^\[PATH_ABSOLUTE\] `systemPrompt: \/.*sys\.md` .* is an absolute path/);
  });

  test('a bundle above the cap fails at start naming the largest files first', async () => {
    await writeTree({
      'p/pipeline.yaml': 'name: big\ncontext: [small.md, large.md]\nstages: [{ id: a, prompt: hi }]\n',
      'p/small.md': 'x'.repeat(3_000),
      'p/large.md': 'y'.repeat(9_000),
    });
    const error = await bundleOf(path.join(dir, 'p/pipeline.yaml'), 10_000).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(BundleTooLargeError);
    expect(error).toMatchObject({ code: 'BUNDLE_TOO_LARGE' });
    expect((error as Error).message).toMatch(
      new RegExp(`^\\[BUNDLE_TOO_LARGE\\] the files of pipeline big come to 11\\.8 KiB, above the cap of 9\\.8 KiB; largest: ${path.join(dir, 'p/large.md')} \\(8\\.8 KiB\\), ${path.join(dir, 'p/small.md')} \\(2\\.9 KiB\\), `),
    );
    expect((error as Error).message).toContain('AGENT_PIPELINE_BUNDLE_MAX_BYTES');
    expect((error as Error).message).toContain('--files-from-worker');
  });
});
