import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { formatRunInputProblems } from '../../src/pipeline/run-input-problems.js';
import { findRunInputProblems, RUN_INPUT_VERSION } from '../../src/pipeline/run-input.js';

/* The workflow's own check of its input (issue 10 item 6): pure, so every case is a plain call. */

const stage = (id: string, extra: Record<string, unknown> = {}) => ({ id, prompt: `do ${id}`, ...extra });
const input = (pipeline: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  version: RUN_INPUT_VERSION,
  pipeline: { name: 'p', ...pipeline },
  baseDir: '/tmp/p',
  pipelineFile: 'p.yaml',
  inputs: {},
  ...extra,
});
const messages = (value: unknown, options = {}) => findRunInputProblems(value, options).map((p) => `${p.path}: ${p.message}`);

describe('findRunInputProblems', () => {
  test('a sound input has none, with or without a version (runs started before it existed)', () => {
    const sound = input({ stages: [stage('a'), stage('b', { needs: ['a'] })] });
    expect(messages(sound)).toEqual([]);
    const { version: _version, ...withoutVersion } = sound;
    expect(messages(withoutVersion)).toEqual([]);
  });

  test.each([
    ['not an object', 'nonsense', [': the run input must be an object']],
    ['nonsense', { nonsense: true }, ['(root|): unknown field "nonsense"', 'pipeline: is required \\(an object\\)', 'baseDir: is required', 'pipelineFile: is required', 'inputs: is required']],
    ['an unknown version', input({ stages: [stage('a')] }, { version: 7 }), ['version: unknown run input version 7; this worker reads version 1']],
    ['a stage that needs itself', input({ stages: [stage('a', { needs: ['a'] })] }), ['pipeline.stages\\[0\\].needs\\[0\\]: stage "a" cannot need itself']],
    ['a cycle', input({ stages: [stage('a', { needs: ['b'] }), stage('b', { needs: ['a'] })] }), ['pipeline.stages\\[0\\].needs: dependency cycle: a -> b -> a']],
    ['an unknown backend', input({ stages: [stage('a', { backend: 'gpt-cli' })] }), ['pipeline.stages\\[0\\].backend: .*"gpt-cli"']],
    ['wrong types', input({ stages: [stage('a', { retries: 'three' })] }), ['pipeline.stages\\[0\\].retries: "three" is not a number']],
    ['an unknown field', input({ stages: [stage('a', { colour: 'blue' })] }), ['pipeline.stages\\[0\\]: unknown field "colour"']],
    ['a missing stage id', input({ stages: [{ prompt: 'x' }] }), ['pipeline.stages\\[0\\].id: is required \\(a string\\)']],
    // Described as `validate` describes them (issue-messages.ts): the value, and what is allowed.
    ['a bad duration', input({ stages: [stage('a', { timeout: 'soon' })] }), ['pipeline.stages\\[0\\].timeout: "soon" is not a duration']],
    ['an unknown choice', input({ stages: [stage('a', { permissionMode: 'yolo' })] }), ['pipeline.stages\\[0\\].permissionMode: "yolo" .*acceptEdits']],
    ['a review of a stage it does not come after', input({ stages: [stage('a'), stage('r', { review: { of: 'a' } })] }), ['pipeline.stages\\[1\\].review.of: stage "r" reviews "a" but does not run after it']],
  ])('%s', (_name, value, expected) => {
    const found = messages(value);
    for (const pattern of expected) expect(found.some((m) => new RegExp(`^${pattern}`).test(m)), `${pattern} in ${JSON.stringify(found)}`).toBe(true);
  });

  test('a backend a worker registers is accepted when the input or the caller names it, and named when unknown', () => {
    const custom = input({ defaults: { backend: 'my-backend' }, stages: [stage('a'), stage('b', { backend: 'my-backend' })] });
    expect(messages(custom)).toEqual([
      'pipeline.defaults.backend: "my-backend" is not a backend; use claude-cli or anthropic-api',
      'pipeline.stages[1].backend: "my-backend" is not a backend; use claude-cli or anthropic-api',
    ]);
    expect(messages(custom, { backends: ['my-backend'] })).toEqual([]);
    expect(messages({ ...custom, backends: ['my-backend'] })).toEqual([]);
    // The graph is still checked once the backends pass.
    expect(messages(input({ stages: [stage('a', { backend: 'my-backend', needs: ['a'] })] }, { backends: ['my-backend'] }))).toEqual([
      'pipeline.stages[0].needs[0]: stage "a" cannot need itself',
    ]);
  });

  test('the message lists every problem with its path', () => {
    const text = formatRunInputProblems(findRunInputProblems({ nonsense: true }));
    expect(text).toMatch(/^\[PIPELINE_INVALID\]/);
    expect(text).toContain('unknown field "nonsense"');
    expect(text).toContain('baseDir');
  });

  test('every recorded history started with an input the check accepts (so replay does not fail)', async () => {
    for (const name of ['linear', 'parallel', 'rework', 'question', 'cancelled']) {
      const history = JSON.parse(await readFile(path.join(import.meta.dirname, '..', 'replay', 'histories', `${name}.json`), 'utf8')) as {
        events: { workflowExecutionStartedEventAttributes?: { input: { payloads: { data: string }[] } } }[];
      };
      const data = history.events[0].workflowExecutionStartedEventAttributes!.input.payloads[0].data;
      expect(messages(JSON.parse(Buffer.from(data, 'base64').toString('utf8'))), name).toEqual([]);
    }
  });
});
