import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { validatePipelineFile } from '../../src/library/validate-pipeline.js';
import { readFinalAnswer } from '../../src/library/final-answer.js';
import { recordReview, renderReworkBrief } from '../../src/pipeline/review-ledger.js';

/*
 * Issue 31's smaller items on the pure and file side: what `validate` says about an agent file's references, and what
 * a reworked stage is told to end with.
 */

let baseDir: string;
beforeEach(async () => {
  baseDir = await mkdtemp(path.join(tmpdir(), 'seed-rest-'));
});
afterEach(async () => {
  await rm(baseDir, { recursive: true, force: true });
});

const write = async (file: string, text: string): Promise<void> => {
  await mkdir(path.dirname(path.join(baseDir, file)), { recursive: true });
  await writeFile(path.join(baseDir, file), text);
};

describe('validate', () => {
  it('notes an agent file reference that does not exist, naming the agent file, the reference and the fix', async () => {
    await write('agents/writer.md', '---\nname: writer\nreferences: [refs/voice.md, refs/missing.md]\n---\nYou write.\n');
    await write('agents/refs/voice.md', 'Plain words.\n');
    await write('p.yaml', 'name: p\nstages:\n  - id: a\n    agent: agents/writer.md\n    prompt: Write.\n');
    const report = await validatePipelineFile(path.join(baseDir, 'p.yaml'));
    expect(report.problems).toEqual([]);
    expect(report.notes.map((n) => `${n.field}: ${n.message}`)).toEqual([
      `stages[0].agent: agent file ${path.join(baseDir, 'agents/writer.md')} lists reference refs/missing.md, which cannot be read (ENOENT at ${path.join(baseDir, 'agents/refs/missing.md')}); ` +
        'the stage runs without it (fix the path or remove it from `references`)',
    ]);
  });
});

describe('stage options from run inputs', () => {
  it('validate refuses template text that would reach the backend as written, an undeclared input, and a default the option cannot take', async () => {
    await write(
      'p.yaml',
      'name: p\ninputs:\n  model: { default: sonnet }\n  mode: { default: sometimes }\ndefaults: { model: "{{inputs.model}}" }\nstages:\n' +
        '  - { id: a, prompt: Write., model: "claude-{{inputs.model}}" }\n  - { id: b, prompt: Write., timeout: "{{inputs.time}}" }\n  - { id: c, prompt: Write., permissionMode: "{{inputs.mode}}" }\n',
    );
    const report = await validatePipelineFile(path.join(baseDir, 'p.yaml'), { checkFiles: false });
    expect(report.problems.map((p) => `${p.field}: ${p.message}`)).toEqual([
      'stages[0].model: "claude-{{inputs.model}}" would reach the backend as written: model takes its own value or one whole run input, "{{inputs.NAME}}"',
      'stages[1].timeout: {{inputs.time}}: the pipeline declares no such input (add it under inputs:)',
      expect.stringMatching(/^stages\[2\]\.permissionMode: input mode is "sometimes", which permissionMode cannot take: expected one of default, manual, acceptEdits, dontAsk/),
    ]);
  });
});

describe('workspace.shared', () => {
  it('needs workspace.dir', async () => {
    await write('p.yaml', 'name: p\nworkspace: { repo: ., shared: true }\nstages:\n  - { id: a, prompt: Write. }\n');
    const report = await validatePipelineFile(path.join(baseDir, 'p.yaml'), { checkFiles: false });
    expect(report.problems.map((p) => `${p.field}: ${p.message}`)).toEqual([expect.stringMatching(/^workspace\.shared: `shared` needs `workspace\.dir`/)]);
  });
});

describe('the rework brief', () => {
  const ledger = recordReview(undefined, 'review', 1, ['The headline is too long.']);

  it('asks a reporting stage for its report block again', () => {
    expect(renderReworkBrief(ledger, 'Shorten it.', 2)).toMatch(/end with the same JSON report block as before\.$/);
  });

  it('asks a `contract: none` stage for its whole answer again, and for no report block', () => {
    const brief = renderReworkBrief(ledger, 'Shorten it.', 2, 'none');
    expect(brief).toContain('- F1: The headline is too long.');
    expect(brief).not.toContain('same JSON report block');
    expect(brief).toMatch(/give your whole answer again, revised: it replaces your earlier answer as the deliverable\. Add no JSON report block\.$/);
  });
});

describe('readFinalAnswer', () => {
  const key = '.agent-pipeline/runs/r-1/stages/s/round-1-3-ab/attempt-1.answer.md';
  const refOf = (text: string, k = key) => ({ key: k, bytes: Buffer.byteLength(text), sha256: createHash('sha256').update(text).digest('hex') });

  it('reads the kept answer, checked against its size and hash', async () => {
    await write(key, 'The whole answer.');
    expect(await readFinalAnswer(refOf('The whole answer.'), { workspacesRoot: baseDir })).toBe('The whole answer.');
  });

  it('refuses a key outside the workers\' own folder, a symlink, and a file changed since', async () => {
    const opts = { workspacesRoot: baseDir };
    await expect(readFinalAnswer(refOf('x', '../../etc/passwd'), opts)).rejects.toMatchObject({ code: 'FINAL_ANSWER_NOT_FOUND' });
    await expect(readFinalAnswer(refOf('x', '.agent-pipeline/runs/../../x/stages/s/e/attempt-1.answer.md'), opts)).rejects.toMatchObject({ code: 'FINAL_ANSWER_NOT_FOUND' });
    await write('secret.txt', 'secret');
    await mkdir(path.join(baseDir, path.dirname(key)), { recursive: true });
    await symlink(path.join(baseDir, 'secret.txt'), path.join(baseDir, key));
    await expect(readFinalAnswer(refOf('secret'), opts)).rejects.toMatchObject({ code: 'FINAL_ANSWER_NOT_FOUND' });
    await rm(path.join(baseDir, key));
    await write(key, 'Changed.');
    await expect(readFinalAnswer(refOf('Original'), opts)).rejects.toThrow(/sha256 differs|cannot read/);
  });
});
