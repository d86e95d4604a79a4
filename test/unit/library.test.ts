import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { definePipeline, InvalidRequestError, PipelineInvalidError, validatePipeline, type RunState } from '../../src/library/index.js';
import { cliMessageOf } from '../../src/errors.js';
import { prepareRunInput } from '../../src/library/pipeline-source.js';
import { StageEventTracker } from '../../src/library/run-events.js';

describe('in-memory pipeline definitions', () => {
  test('are validated like files and become the run input, with paths relative to baseDir', async () => {
    const pipeline = definePipeline({ name: 'hello', inputs: { who: { default: 'world' } }, stages: [{ id: 'greet', prompt: 'Greet {{inputs.who}}.' }] });
    const input = await prepareRunInput(pipeline, { baseDir: '/srv/pipelines', inputs: { who: 'you' } });
    expect(input).toMatchObject({ pipeline: { name: 'hello' }, baseDir: '/srv/pipelines', pipelineFile: '<definition hello>', inputs: { who: 'you' } });
  });

  test('that are invalid throw PipelineInvalidError listing every problem by field', async () => {
    const bad = { name: 'bad', stages: [{ id: 'a', prompt: 'Say x.', timeout: 'soon' }, { id: 'b', prompt: 'Say x.', retries: -1 }] };
    const err = await prepareRunInput(bad as never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PipelineInvalidError);
    expect(err).toMatchObject({ code: 'PIPELINE_INVALID', file: '<definition bad>' });
    expect((err as PipelineInvalidError).problems.map((p) => p.field)).toEqual(['stages[0].timeout', 'stages[1].retries']);
    expect((err as PipelineInvalidError).problems.every((p) => p.line === undefined)).toBe(true);
  });

  test('may name a backend registered with the worker only when the client is told its name', async () => {
    const pipeline = definePipeline<'echo'>({ name: 'custom', stages: [{ id: 'a', prompt: 'Say hi.', backend: 'echo' }] });
    const err = (await prepareRunInput(pipeline).catch((e: unknown) => e)) as PipelineInvalidError;
    expect(err.problems).toEqual([
      expect.objectContaining({ field: 'stages[0].backend', message: expect.stringContaining('"echo" is not a backend; use claude-cli or anthropic-api (for a backend registered with the worker, tell the client its name') }),
    ]);
    await expect(prepareRunInput(pipeline, { backends: ['echo'] })).resolves.toMatchObject({ pipeline: { stages: [{ backend: 'echo' }] } });
  });

  test('a run input an option cannot take is refused before the run starts, naming the field, the input and the value', async () => {
    const pipeline = definePipeline({
      name: 'per-run',
      inputs: { timeout: { default: '30m' }, tier: { description: 'no default' } },
      stages: [{ id: 'a', prompt: 'Say hi.', timeout: '{{inputs.timeout}}' }, { id: 'b', prompt: 'Say hi.', model: '{{inputs.tier}}' }],
    });
    const err = (await prepareRunInput(pipeline, { inputs: { timeout: 'soon', tier: 'haiku' } }).catch((e: unknown) => e)) as InvalidRequestError;
    expect(err).toBeInstanceOf(InvalidRequestError);
    expect(err.code).toBe('INPUT_INVALID');
    expect(err.message).toBe(
      '[INPUT_INVALID] <definition per-run>: stages[0].timeout: input timeout is "soon", which timeout cannot take: expected a duration such as "90s", "30m" or "2h" (give another value: `inputs: { timeout: ... }`)',
    );
    expect(cliMessageOf(err)).toMatch(/which timeout cannot take: expected a duration such as "90s", "30m" or "2h" \(pass --input timeout=…\)$/);
    // An input the option reads that the run does not have: refused too, where the run would fail at once.
    const missing = (await prepareRunInput(pipeline).catch((e: unknown) => e)) as InvalidRequestError;
    expect(missing.message).toContain('stages[1].model: {{inputs.tier}} names an input the run does not have; declare it under inputs: (with a default, or give it: `inputs: { tier: ... }`)');
    await expect(prepareRunInput(pipeline, { inputs: { timeout: '7m', tier: 'haiku' } })).resolves.toMatchObject({ inputs: { timeout: '7m', tier: 'haiku' } });
  });

  test('missing inputs are an INPUT_INVALID request error', async () => {
    const pipeline = definePipeline({ name: 'needs-input', inputs: { feature: { required: true } }, stages: [{ id: 'a', prompt: 'Build {{inputs.feature}}.' }] });
    await expect(prepareRunInput(pipeline)).rejects.toMatchObject({ code: 'INPUT_INVALID' });
  });
});

describe('validatePipeline', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'validate-pipeline-'));
    await writeFile(path.join(dir, 'step.md'), 'Use {{inputs.nope}}.\n');
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('refuses an MCP server variable the stage\'s sandbox would refuse, at its line', async () => {
    const file = path.join(dir, 'mcp.yaml');
    await writeFile(
      file,
      'name: p\nmcpServers: { db: { command: npx, env: { GOOD_1: x, BAD-NAME: y } } }\nstages:\n  - id: a\n    prompt: Say hi.\n    mcpServers: { s: { command: node, env: { 1X: z } }, r: { type: http, url: "https://mcp.example.com" } }\n',
    );
    const message = (key: string) => `"${key}" is not a variable name (letters, digits and _, not starting with a digit): the server's variables are set in the stage's sandbox, which refuses it; rename it`;
    expect((await validatePipeline(file)).problems).toEqual([
      { file, line: 2, column: 63, field: 'mcpServers.db.env.BAD-NAME', message: message('BAD-NAME') },
      { file, line: 6, column: 50, field: 'stages[0].mcpServers.s.env.1X', message: message('1X') },
    ]);
  });

  test('reports the problems `agent-pipeline validate` lists for a file, located by line and field', async () => {
    const file = path.join(dir, 'p.yaml');
    await writeFile(file, 'name: p\ncontext: [missing.md]\nstages:\n  - id: a\n    prompt: step.md\n');
    const report = await validatePipeline(file);
    expect(report).toMatchObject({ file, pipeline: { name: 'p' }, notes: [] });
    expect(report.problems).toEqual([
      { file, line: 2, column: 11, field: 'context[0]', message: `context file ${path.join(dir, 'missing.md')} does not exist` },
      { file: path.join(dir, 'step.md'), line: 1, column: 7, field: 'stages[0].prompt {{inputs.nope}}', message: expect.stringContaining('unknown template variable') },
    ]);
  });

  test('checks a definition against the files under baseDir, with no lines in YAML the caller never wrote', async () => {
    const pipeline = definePipeline({ name: 'def', stages: [{ id: 'a', prompt: 'step.md' }, { id: 'b', needs: ['a'], prompt: 'Read {{stages.a.summary}} and {{stages.c.summary}}.' }] });
    const report = await validatePipeline(pipeline, { baseDir: dir });
    expect(report.file).toBe('<definition def>');
    expect(report.problems.map((p) => [p.file, p.line, p.column, p.field])).toEqual([
      ['<definition def>', undefined, undefined, 'stages[1].prompt {{stages.c.summary}}'],
      [path.join(dir, 'step.md'), 1, 7, 'stages[0].prompt {{inputs.nope}}'],
    ]);
  });

  test('says a missing file is missing and to check the path, as start does (not only ENOENT)', async () => {
    const file = path.join(dir, 'no-such-pipeline.yaml');
    expect((await validatePipeline(file)).problems).toEqual([{ file, field: '', message: 'cannot read the pipeline file: no such file; check the path' }]);
  });

  test('reports a schema problem instead of throwing, and a valid pipeline with none', async () => {
    const bad = await validatePipeline({ name: 'bad', stages: [{ id: 'a', prompt: 'Say hello.', retries: -1 }] } as never);
    expect(bad).toMatchObject({ file: '<definition bad>', problems: [{ file: '<definition bad>', field: 'stages[0].retries' }] });
    expect(bad.pipeline).toBeUndefined();
    await expect(validatePipeline(definePipeline({ name: 'ok', stages: [{ id: 'a', prompt: 'Hello.' }] }))).resolves.toMatchObject({ problems: [], notes: [] });
  });
});

describe('start runs the checks of validate first', () => {
  // A one-word prompt that names no file, and an input the pipeline does not declare: both used to pass `start`.
  const broken = definePipeline({ name: 'broken', stages: [{ id: 'a', prompt: 'implemnt' }, { id: 'b', needs: ['a'], prompt: 'Use {{inputs.nope}}.' }] });

  test('refuses with PipelineInvalidError listing the problems validate reports, and starts nothing', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'start-checks-'));
    try {
      const report = await validatePipeline(broken, { baseDir: dir });
      expect(report.problems.map((p) => p.field)).toEqual(['stages[0].prompt', 'stages[1].prompt {{inputs.nope}}']);
      const err = (await prepareRunInput(broken, { baseDir: dir }).catch((e: unknown) => e)) as PipelineInvalidError;
      expect(err).toBeInstanceOf(PipelineInvalidError);
      expect(err.code).toBe('PIPELINE_INVALID');
      expect(err.problems).toEqual(report.problems);
      expect(err.message).toContain('stages[0].prompt: prompt "implemnt" looks like a file name but matches no file');
      expect(err.message).toContain('stages[1].prompt {{inputs.nope}}: unknown template variable');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('checks a file the same way, and with checkFiles: false still the inline templates', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'start-checks-'));
    try {
      const file = path.join(dir, 'p.yaml');
      await writeFile(file, 'name: p\nstages:\n  - id: a\n    prompt: implemnt\n  - id: b\n    prompt: Use {{inputs.nope}}.\n');
      const err = (await prepareRunInput(file).catch((e: unknown) => e)) as PipelineInvalidError;
      expect(err.problems).toEqual((await validatePipeline(file)).problems);
      expect(err.problems.map((p) => [p.line, p.field])).toEqual([[4, 'stages[0].prompt'], [6, 'stages[1].prompt {{inputs.nope}}']]);
      const unchecked = (await prepareRunInput(file, { checkFiles: false }).catch((e: unknown) => e)) as PipelineInvalidError;
      expect(unchecked.problems.map((p) => p.field)).toEqual(['stages[1].prompt {{inputs.nope}}']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('run events', () => {
  const state = (stages: RunState['stages']): RunState => ({ runId: 'r', pipeline: 'p', status: 'running', inputs: {}, stages, costUsd: 0, startedAt: 0 });
  const stage = (id: string, status: RunState['stages'][number]['status'], extra: Partial<RunState['stages'][number]> = {}) => ({ id, status, backend: 'claude-cli', model: 'sonnet', ...extra });

  test('tell each change of a stage once, in stage order', () => {
    const tracker = new StageEventTracker();
    expect(tracker.next(state([stage('a', 'running', { attempt: 1 }), stage('b', 'pending')])).map((e) => [e.type, 'stage' in e ? e.stage : ''])).toEqual([['stage_started', 'a']]);
    expect(tracker.next(state([stage('a', 'running', { attempt: 1 }), stage('b', 'pending')]))).toEqual([]);
    expect(tracker.next(state([stage('a', 'running', { attempt: 2 }), stage('b', 'pending')])).map((e) => e.type)).toEqual(['stage_started']);
    const waiting = { kind: 'approval' as const, message: 'approve?', commands: [], since: 5 };
    const events = tracker.next(state([stage('a', 'completed'), stage('b', 'waiting', { waitingFor: waiting })]));
    expect(events.map((e) => e.type)).toEqual(['stage_completed', 'stage_waiting']);
    expect(events[1]).toMatchObject({ stage: 'b', waitingFor: waiting });
  });

  test('for a run that already ended, tell every stage’s final state', () => {
    const events = new StageEventTracker().next(state([stage('a', 'completed'), stage('b', 'failed', { error: { type: 'X', message: 'boom' } }), stage('c', 'skipped', { skip: { reason: 'r', dependentsRun: false } })]));
    expect(events.map((e) => e.type)).toEqual(['stage_completed', 'stage_failed', 'stage_skipped']);
  });
});
