import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { validatePipeline } from '../../src/library/validate-pipeline.js';
import { PipelineValidationError } from '../../src/pipeline/errors.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/** A pipeline with mistakes of every kind: schema (unknown field, bad duration, agent field on a command), graph, condition, template. */
const MANY_MISTAKES = readFileSync(path.join(PROJECT_ROOT, 'test', 'fixtures', 'pipelines', 'many-mistakes.yaml'), 'utf8');

/** field → line of every mistake in MANY_MISTAKES. */
const EXPECTED: [field: RegExp, line: number, message: RegExp][] = [
  [/^stages\[0\]$/, 7, /colour/],
  [/^stages\[1\]\.timeout$/, 10, /5 minutes/],
  [/^stages\[1\]\.prompt \{\{inputs\.topc\}\}$/, 11, /topc|declare/],
  [/^stages\[2\]\.needs\[1\]$/, 13, /unknown stage "biuld"/],
  [/^stages\[2\]\.when$/, 14, /inputs\.nope/],
  [/^stages\[3\]\.model$/, 19, /runs a command/],
];

describe('validation reports every problem of a file in one pass', () => {
  let dir: string;
  let file: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'validate-every-'));
    file = path.join(dir, 'pipeline.yaml');
    await writeFile(file, MANY_MISTAKES);
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  test('validatePipeline lists schema, graph, semantic and template mistakes together, each with its line and field', async () => {
    const report = await validatePipeline(file);
    for (const [field, line, message] of EXPECTED) {
      expect(report.problems, `${String(field)} at line ${line}`).toContainEqual(expect.objectContaining({ file, line, field: expect.stringMatching(field), message: expect.stringMatching(message) }));
    }
    expect(report.problems).toHaveLength(EXPECTED.length);
    expect(report.pipeline).toBeUndefined();
  });

  test('parsePipeline (what the worker and start use) throws with every problem the pipeline itself holds', () => {
    let error: unknown;
    try {
      parsePipeline(MANY_MISTAKES, 'pipeline.yaml');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(PipelineValidationError);
    const fields = (error as PipelineValidationError).problems.map((p) => p.path);
    // The template variable is checked where the prompt files are read (validatePipeline); the rest are here.
    expect(fields).toEqual(expect.arrayContaining(['stages[0]', 'stages[1].timeout', 'stages[2].needs[1]', 'stages[2].when', 'stages[3].model']));
  });

  test('a check a schema error makes impossible is skipped for that stage only', async () => {
    // The review's `needs` is unreadable, so what it may read is unknown: its prompt is not checked; the other stage's is.
    const text = MANY_MISTAKES.replace('needs: [spec, biuld]', 'needs: [spec, 7 x]').replace('Review {{stages.spec.summary}}', 'Review {{stages.build.summary}}');
    await writeFile(path.join(dir, 'skip.yaml'), text);
    const report = await validatePipeline(path.join(dir, 'skip.yaml'));
    const fields = report.problems.map((p) => p.field);
    expect(fields).toContain('stages[2].needs[1]');
    expect(fields.filter((f) => f.startsWith('stages[2].prompt'))).toEqual([]);
    expect(fields).toContain('stages[1].prompt {{inputs.topc}}');
  });

  test('lists problems in the order of the file, by line then column, whichever check found them; the files a pipeline names after it', async () => {
    // The schema's problems came first, then the graph's, then the file checks': `validate` read out of line order.
    await mkdir(path.join(dir, 'steps'), { recursive: true });
    await writeFile(path.join(dir, 'steps', 'a.md'), 'Write it.\nFor {{inputs.who}}.\n');
    const text = [
      'name: order',
      'defaults:',
      '  commitMessage: "done {{inputs.nope}}"',
      'stages:',
      '  - id: a',
      '    prompt: steps/a.md',
      '    sandbox: { allowedDomains: [localhost] }',
      '  - { id: b, prompt: "Do {{inputs.gone}}", timeout: 5 minutes, needs: [a, zz] }',
      '  - id: c',
      '    needs: [b]',
      '    colour: blue',
      '    prompt: Fine.',
      '',
    ].join('\n');
    await writeFile(path.join(dir, 'order.yaml'), text);
    const report = await validatePipeline(path.join(dir, 'order.yaml'));
    const places = report.problems.map((p) => [path.basename(p.file), p.line, p.column, p.field]);
    expect(places).toEqual([
      ['order.yaml', 3, 18, 'defaults.commitMessage'],
      ['order.yaml', 7, 33, 'stages[0].sandbox.allowedDomains[0]'],
      ['order.yaml', 8, 28, 'stages[1].prompt {{inputs.gone}}'],
      ['order.yaml', 8, 53, 'stages[1].timeout'],
      ['order.yaml', 8, 75, 'stages[1].needs[1]'],
      ['order.yaml', 11, 5, 'stages[2]'],
      ['a.md', 2, 7, 'stages[0].prompt {{inputs.who}}'],
    ]);
    // What `start` and the worker read: the parser's own problems, in the same order.
    let error: unknown;
    try {
      parsePipeline(text, 'order.yaml');
    } catch (err) {
      error = err;
    }
    expect((error as PipelineValidationError).problems.map((p) => [p.line, p.path])).toEqual([[8, 'stages[1].timeout'], [8, 'stages[1].needs[1]'], [11, 'stages[2]']]);
  });
});
