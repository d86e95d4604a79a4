import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeAnswerFile, type AnswerFileWrite } from '../../src/activities/backends/anthropic-api/answer-file.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';

/*
 * Issue 19, reproduction 6 (the parts without Temporal): two parallel stages with the same `output:` overwrote each
 * other silently, and an API stage wrote its answer through a symlinked `outputs/` folder to outside the workspace.
 * (The `ended` record and `prune` are in run-folders.test.ts and test/integration/prune-safety.test.ts.)
 */

let base: string;
beforeEach(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'data-safety-'));
});
afterEach(async () => rm(base, { recursive: true, force: true }));

describe('validate', () => {
  it('refuses two stages that may run at once writing the same output', () => {
    const problems = pipelineProblems(
      'name: p\nstages:\n  - { id: a, prompt: Write., output: notes.md }\n  - { id: b, prompt: Write., output: notes.md }\n',
    );
    expect(problems.join('\n')).toContain('stages[1].output: stages "a" and "b" may run at once and both write notes.md');
  });

  it('accepts the same output for stages that run one after the other, or outputs named by stage id', () => {
    expect(pipelineProblems('name: p\nstages:\n  - { id: a, prompt: Write., output: notes.md }\n  - { id: b, needs: [a], prompt: Write., output: notes.md }\n')).toEqual([]);
    expect(pipelineProblems('name: p\ndefaults: { output: "out/{{stage.id}}.md" }\nstages:\n  - { id: a, prompt: Write. }\n  - { id: b, prompt: Write. }\n').filter((p) => p.includes('may run at once'))).toEqual([]);
  });
});

describe('an API stage\'s answer file', () => {
  it('is never written through a symlinked folder to outside the workspace', async () => {
    const workspace = path.join(base, 'workspace');
    const outside = path.join(base, 'outside');
    await mkdir(workspace);
    await mkdir(outside);
    await symlink(outside, path.join(workspace, 'outputs'));
    const request = { workspace: { dir: workspace }, claimFile: () => undefined, continuation: undefined, stage: { id: 'a' } } as unknown as AnswerFileWrite['request'];
    const written = writeAnswerFile({ request, relativePath: 'outputs/a.md', answer: 'The answer.', contract: 'none' });
    const error = await written.then(() => undefined, (err: unknown) => err as { type?: string; message: string });
    expect(existsSync(path.join(outside, 'a.md')), 'the answer landed outside the workspace').toBe(false);
    expect(error?.type).toBe('CONFIG_INVALID');
    expect(error?.message).toContain('its folder is a symlink leading out');
  });

  it('is written in a folder inside the workspace as before', async () => {
    const workspace = path.join(base, 'workspace');
    await mkdir(workspace);
    const request = { workspace: { dir: workspace }, claimFile: () => undefined, continuation: undefined, stage: { id: 'a' } } as unknown as AnswerFileWrite['request'];
    expect(await writeAnswerFile({ request, relativePath: 'outputs/a.md', answer: 'The answer.', contract: 'none' })).toBe(true);
    expect(await readFile(path.join(workspace, 'outputs/a.md'), 'utf8')).toBe('The answer.');
  });
});
