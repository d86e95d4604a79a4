import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { validatePipeline } from '../../src/library/index.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { parseJson, runCli, runCliMixed } from './cli-helpers.js';

/** No server at all: what a user sees when Temporal is not there, or a command or file is wrong. */
const OFFLINE = { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: '127.0.0.1:1' };
const NO_STACK = /^\s+at /m;

describe('errors a user can act on', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'cli-errors-'));
    await mkdir(path.join(dir, 'steps'));
    await writeFile(path.join(dir, 'steps', 'spec.md'), 'Spec for {{inputs.feature}}.\nIn run {{run.id}} use {{inputs.colour}}.\n');
    await writeFile(
      path.join(dir, 'pipeline.yaml'),
      [
        'name: broken',
        'inputs:',
        '  feature: { required: true }',
        'stages:',
        '  - id: spec',
        '    agent: agents/missing.md',
        '    prompt: steps/spec.md',
        '  - id: build',
        '    prompt: |',
        '      Build {{inputs.feature}}',
        '      from {{stages.review.summary}}',
        '  - id: review',
        '    needs: [build]',
        '    prompt: steps/none.md',
        '',
      ].join('\n'),
    );
    await writeFile(path.join(dir, 'schema.yaml'), 'name: bad\nstages:\n  - id: a\n    prompt: Say hi.\n    retries: many\n');
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  test('an unreachable server exits 3 naming the address tried and how to configure it', async () => {
    // One command as a user runs it, the others in one process (a process each cost more than the checks).
    const commands = [['status', 'some-run'], ['list'], ['schedule', 'list'], ['answer', 'some-run', 'yes']];
    const results = await runCliMixed(commands, new Set([0]), OFFLINE);
    for (const [i, result] of results.entries()) {
      const args = commands[i];
      expect(result.exitCode, args.join(' ')).toBe(3);
      expect(result.stderr).toMatch(/^agent-pipeline: \[TEMPORAL_UNREACHABLE\] cannot reach Temporal at 127\.0\.0\.1:1 \(connection refused\)\. /);
      expect(result.stderr).toContain('TEMPORAL_ADDRESS');
      expect(result.stderr).toContain('TEMPORAL_API_KEY');
      expect(result.stderr).not.toMatch(NO_STACK);
    }
  });

  test('validate names the file, line and field of every problem and exits 2', async () => {
    const result = await runCli(['validate', path.join(dir, 'pipeline.yaml')], OFFLINE);
    expect(result.exitCode, result.stderr).toBe(2);
    const file = path.join(dir, 'pipeline.yaml');
    // In file order: the pipeline file's by line, then each file it names; each at its line and column, as compilers
    // write them (the column was only in --json).
    expect(result.stdout.split('\n')).toEqual([
      `✘ ${file}: 4 problems`,
      expect.stringMatching(new RegExp(`^  ${file}:6:12 stages\\[0\\]\\.agent: .*cannot read agent file ${dir}/agents/missing\\.md`)),
      expect.stringMatching(new RegExp(`^  ${file}:11:14 stages\\[1\\]\\.prompt \\{\\{stages\\.review\\.summary\\}\\}: unknown template variable: the stage does not run after "review"`)),
      `  ${file}:14:13 stages[2].prompt: prompt file ${dir}/steps/none.md does not exist`,
      `  ${path.join(dir, 'steps', 'spec.md')}:2:25 stages[0].prompt {{inputs.colour}}: unknown template variable: the pipeline declares no such input (add it under inputs:)`,
    ]);
  });

  test('validate and start name every mistake of a file in one pass: schema, graph, condition and template together', async () => {
    // Copied, so that the file named in the output is this test's own.
    const file = path.join(dir, 'many.yaml');
    await copyFile(path.join(PROJECT_ROOT, 'test', 'fixtures', 'pipelines', 'many-mistakes.yaml'), file);
    const result = await runCli(['validate', file], OFFLINE);
    expect(result.exitCode, result.stderr).toBe(2);
    const lines = result.stdout.split('\n');
    expect(lines[0]).toBe(`✘ ${file}: 6 problems`);
    for (const [place, field] of [['7:5', 'stages[0]'], ['10:14', 'stages[1].timeout'], ['11:21', 'stages[1].prompt {{inputs.topc}}'], ['13:19', 'stages[2].needs[1]'], ['14:11', 'stages[2].when'], ['19:12', 'stages[3].model']] as const) {
      expect(lines).toContainEqual(expect.stringContaining(`  ${file}:${place} ${field}: `));
    }
    // start refuses before it reaches for Temporal, with the same list.
    const start = await runCli(['start', file, '--input', 'topic=x'], OFFLINE);
    expect(start.exitCode, start.stderr).toBe(2);
    expect(start.stderr).toContain('6 problems');
    for (const field of ['stages[0]', 'stages[1].timeout', 'stages[1].prompt {{inputs.topc}}', 'stages[2].needs[1]', 'stages[2].when', 'stages[3].model']) expect(start.stderr).toContain(` ${field}: `);
  });

  test('a list written as one value (`needs: a`) is refused by validate, start and validatePipeline with the list to write', async () => {
    const file = path.join(dir, 'needs.yaml');
    await writeFile(file, ['name: needs', 'stages:', '  - id: a', '    prompt: Say hi.', '  - id: b', '    prompt: Say hi.', '    needs: a', ''].join('\n'));
    const expected = `${file}:7:12 stages[1].needs: "a" is not a list; write \`needs: [a]\``;
    const [validate, start] = await runCliMixed([['validate', file], ['start', file]], new Set([0]), OFFLINE);
    expect(validate.exitCode, validate.all).toBe(2);
    expect(validate.stdout.split('\n')).toEqual([`✘ ${file}: 1 problem`, `  ${expected}`]);
    expect(start.exitCode, start.all).toBe(2);
    expect(start.stderr).toContain(`\n  ${expected}`);
    expect((await validatePipeline(file)).problems).toEqual([{ file, line: 7, column: 12, field: 'stages[1].needs', message: '"a" is not a list; write `needs: [a]`' }]);
  });

  test('validate --json reports schema problems with their line, and a valid file passes with exit 0', async () => {
    const bad = await runCli(['validate', path.join(dir, 'schema.yaml'), '--json'], OFFLINE);
    expect(bad.exitCode, bad.stderr).toBe(2);
    expect(parseJson(bad)).toEqual({
      file: path.join(dir, 'schema.yaml'),
      valid: false,
      pipeline: null,
      stages: [],
      problems: [{ file: path.join(dir, 'schema.yaml'), line: 5, column: 14, field: 'stages[0].retries', message: expect.stringContaining('number') }],
      notes: [],
    });
    const good = await runCli(['validate', path.join(PROJECT_ROOT, 'examples', 'demo', 'pipeline.yaml'), '--json'], OFFLINE);
    expect(good.exitCode, good.stderr).toBe(0);
    expect(parseJson(good)).toMatchObject({ valid: true, pipeline: 'demo', stages: ['spec', 'implement', 'review', 'release-notes'], problems: [] });
  });

  test('bad usage exits 2 with the reason and the command help, never a stack trace', async () => {
    const cases: [string[], RegExp][] = [
      [['launch'], /unknown command 'launch'/],
      [['reject', 'some-run'], /required option '--reason <text>' not specified/],
      [['list', '--since', 'yesterday'], /expected a duration such as 30s, 15m, 2h or 1d, got "yesterday"/],
      [['approve', 'r', '--allow', 'Bash', '--allow-all'], /option '--allow <tool>' cannot be used with option '--allow-all'/],
      [['start', path.join(dir, 'missing.yaml')], /cannot read pipeline file .*missing\.yaml: no such file; check the path/],
      [['start', path.join(dir, 'schema.yaml')], /\[PIPELINE_INVALID\]/],
      [['schedule', 'create', path.join(dir, 'schema.yaml'), '--every', '1h', '--cron', '* * * * *'], /give exactly one of --cron EXPR or --every DURATION/],
      [['schedule', 'create', path.join(dir, 'schema.yaml'), '--every', '1h', '--overlap', 'sometimes'], /expected one of skip, buffer-one, buffer-all, cancel-other, terminate-other, allow-all/],
    ];
    // A usage error of commander's and one a command's own code throws, as a user runs them; the rest in one process.
    const results = await runCliMixed(cases.map(([args]) => args), new Set([0, 4]), OFFLINE);
    for (const [i, [args, message]] of cases.entries()) {
      const result = results[i];
      expect(result.exitCode, args.join(' ')).toBe(2);
      expect(result.stderr, args.join(' ')).toMatch(message);
      expect(result.stderr).not.toMatch(NO_STACK);
    }
  });

  test('every command has --help', async () => {
    const commands = ['start', 'watch', 'status', 'list', 'logs', 'answer', 'approve', 'reject', 'retry', 'skip', 'cancel', 'validate', 'worker', 'dev', 'demo'];
    const schedule = ['create', 'list', 'describe', 'pause', 'unpause', 'trigger', 'delete'].map((c) => `schedule ${c}`);
    // The first and a nested one as a user runs them, every other one in one process.
    const all = [...commands, 'schedule', ...schedule];
    const results = await runCliMixed(all.map((command) => [...command.split(' '), '--help']), new Set([0, all.indexOf('schedule create')]), OFFLINE);
    results.forEach((result, i) => {
      expect(result.exitCode, all[i]).toBe(0);
      expect(result.stdout, all[i]).toMatch(new RegExp(`^Usage: agent-pipeline ${all[i]} `));
    });
  });
});
