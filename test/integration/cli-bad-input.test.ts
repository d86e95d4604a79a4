import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseJson, runCliMixed, type CliResult } from './cli-helpers.js';

/*
 * What a user is told about bad input, through the real command: the bad value and what is allowed, the file,
 * and exit 2. No server is needed (or reachable): every check happens before the command connects.
 *
 * The commands run once, in beforeAll, all in one Node process (a process per command cost this file six CPU seconds,
 * nearly all of it loading modules) except a `validate` and a `start` that run as a user runs them; each test checks
 * the results of its own commands.
 */

const OFFLINE = { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: '127.0.0.1:1' };
const NO_STACK = /^\s+at /m;

describe('bad input', () => {
  let dir: string;
  const file = (name: string): string => path.join(dir, name);
  /** Each command's result, by the name the tests give it. */
  const results = new Map<string, CliResult>();
  const result = (name: string): CliResult => results.get(name) ?? expect.fail(`no command named ${name}`);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'cli-bad-input-'));
    await writeFile(file('values.yaml'), ['name: values', 'defaults: { retries: 200, timeout: 30 minutes }', 'stages:', '  - id: a', '    prompt: hi', '    backend: gpt-cli', ''].join('\n'));
    const laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (const [i, key] of [...'bcdefghi'].entries()) laughs.push(`${key}: &${key} [${Array(9).fill(`*${'abcdefghi'[i]}`).join(', ')}]`);
    await writeFile(file('bomb.yaml'), [...laughs, 'name: bomb', 'stages: [{ id: a, prompt: hi }]', ''].join('\n'));
    await writeFile(
      file('paths.yaml'),
      ['name: paths', 'context: [../brief.md]', 'stages:', '  - id: a', '    prompt: Say hi to the team.', '    inputs: [../../etc/passwd]', ''].join('\n'),
    );
    // An inline prompt of 3 MB: one --input that large would not even fit on a command line.
    await writeFile(file('huge.yaml'), ['name: huge', 'stages:', '  - id: a', '    prompt: |', `      ${'All work and no play. '.repeat(140_000)}`, ''].join('\n'));
    // A one-word prompt that names no file and an undeclared input: they used to pass start and fail at run time.
    await writeFile(file('late.yaml'), ['name: late', 'stages:', '  - id: a', '    prompt: implemnt', '  - id: b', '    prompt: Use {{inputs.nope}}.', ''].join('\n'));
    await writeFile(file('fine.yaml'), 'name: fine\nstages: [{ id: a, prompt: Say hello. }]\n');

    const commands: [string, string[]][] = [
      ['validate values', ['validate', file('values.yaml')]],
      ['start values', ['start', file('values.yaml')]],
      ['validate late', ['validate', file('late.yaml')]],
      ['start late', ['start', file('late.yaml')]],
      ['validate bomb', ['validate', file('bomb.yaml'), '--json']],
      ['start bomb', ['start', file('bomb.yaml')]],
      ['validate paths', ['validate', file('paths.yaml')]],
      ['start huge', ['start', file('huge.yaml')]],
      ['start huge from worker', ['start', file('huge.yaml'), '--files-from-worker']],
      ['start id ..', ['start', file('fine.yaml'), '--id', '..']],
      ['start id .', ['start', file('fine.yaml'), '--id', '.']],
      ['start id -x', ['start', file('fine.yaml'), '--id', '-x']],
      ['fork id -x', ['fork', 'some-run', '--from', 'a', '--id=-x']],
      ['schedule id -x', ['schedule', 'create', file('fine.yaml'), '--every', '1h', '--id', '-x']],
      ['approve allow', ['approve', 'some-run', '--allow=--dangerously-skip-permissions']],
    ];
    // `validate` of the bad values and `start` of the pipeline start refuses late, each in a process of its own.
    const own = new Set([0, 3]);
    const outputs = await runCliMixed(commands.map(([, args]) => args), own, OFFLINE);
    commands.forEach(([name], i) => results.set(name, outputs[i]));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  test('a rejected value names itself and what is allowed, in validate and start', () => {
    const validate = result('validate values');
    expect(validate.exitCode, validate.stderr).toBe(2);
    expect(validate.stdout).toContain(`${file('values.yaml')}:6:14 stages[0].backend: "gpt-cli" is not a backend; use claude-cli or anthropic-api`);
    expect(validate.stdout).toContain(`${file('values.yaml')}:2:22 defaults.retries: 200 is too large; use a whole number from 0 to 100`);
    expect(validate.stdout).toContain(`${file('values.yaml')}:2:36 defaults.timeout: "30 minutes" is not a duration; use a string such as "90s", "30m", "2h" or "1d"`);

    const start = result('start values');
    expect(start.exitCode, start.stderr).toBe(2);
    expect(start.stderr).toContain('stages[0].backend: "gpt-cli" is not a backend; use claude-cli or anthropic-api');
    expect(start.stderr).not.toMatch(NO_STACK);
  });

  test('start refuses what validate finds, with the same problems (issue 21)', () => {
    const validate = result('validate late');
    expect(validate.exitCode, validate.stderr).toBe(2);
    const problems = validate.stdout.split('\n').filter((l) => l.startsWith('  '));
    expect(problems).toEqual([
      expect.stringContaining(`${file('late.yaml')}:4:13 stages[0].prompt: prompt "implemnt" looks like a file name but matches no file`),
      expect.stringContaining(`${file('late.yaml')}:6:19 stages[1].prompt {{inputs.nope}}: unknown template variable`),
    ]);

    const start = result('start late');
    expect(start.exitCode, start.stderr).toBe(2);
    expect(start.stderr).toContain(`[PIPELINE_INVALID] ${file('late.yaml')} is not a valid pipeline (2 problems`);
    for (const problem of problems) expect(start.stderr).toContain(problem);
    expect(start.stderr).not.toMatch(NO_STACK);
  });

  test('a YAML alias bomb is exit 2 naming the file, in validate and start', () => {
    const validate = result('validate bomb');
    expect(validate.exitCode, validate.stderr).toBe(2);
    expect(parseJson(validate)).toMatchObject({ valid: false, problems: [{ file: file('bomb.yaml'), field: '', message: expect.stringMatching(/^the YAML cannot be read: .*alias/i) }] });

    const start = result('start bomb');
    expect(start.exitCode, start.stderr).toBe(2);
    expect(start.stderr).toContain(`[PIPELINE_INVALID] ${file('bomb.yaml')} is not a valid pipeline`);
    expect(start.stderr).toMatch(/the YAML cannot be read: .*alias/i);
    expect(start.stderr).not.toMatch(NO_STACK);
  });

  test('validate reports stage inputs and context paths that leave their folder', () => {
    const validate = result('validate paths');
    expect(validate.exitCode, validate.stderr).toBe(2);
    expect(validate.stdout.split('\n')).toEqual([
      `✘ ${file('paths.yaml')}: 2 problems`,
      `  ${file('paths.yaml')}:2:11 context[0]: "../brief.md" leaves the pipeline file's folder; context files are read relative to it, so keep them in that folder or below it`,
      `  ${file('paths.yaml')}:6:14 stages[0].inputs[0]: "../../etc/passwd" leaves the run's workspace; stage inputs are files earlier stages wrote in it, given relative to it (e.g. "docs/spec.md")`,
    ]);
  });

  test('a run input over the payload limit fails at start with exit 2, its size, the limit and the fix', () => {
    // Bundled (the default), the file is over the bundle cap before the input is measured.
    const bundled = result('start huge');
    expect(bundled.exitCode, bundled.stderr).toBe(2);
    expect(bundled.stderr).toContain('[BUNDLE_TOO_LARGE]');
    expect(bundled.stderr).not.toMatch(NO_STACK);

    const start = result('start huge from worker');
    expect(start.exitCode, start.stderr).toBe(2);
    expect(start.stderr).toMatch(/\[INPUT_TOO_LARGE\] the run's input is 2\.9 MB \(\d+ bytes\), over Temporal's payload limit of 2\.0 MB; the largest part is stages\[0\] \(a\) of .*huge\.yaml \(2\.9 MB\)\. Move large text into files/);
    expect(start.stderr).not.toContain('Blob data size');
    expect(start.stderr).not.toMatch(NO_STACK);
  });

  test('a run id that names a folder or starts with "-", or a tool name that reads as a flag, is exit 2 before connecting (issue 19)', () => {
    for (const id of ['..', '.']) {
      const start = result(`start id ${id}`);
      expect(start.exitCode, start.stderr).toBe(2);
      expect(start.stderr).toContain(`[INPUT_INVALID] --id "${id}": "${id}" cannot be a run id`);
    }
    // An id starting with "-" would be read as an option by every command that names the run (or the schedule's runs).
    for (const [name, kind, command] of [['start id -x', 'run', 'status'], ['fork id -x', 'run', 'status'], ['schedule id -x', 'schedule', 'schedule describe']]) {
      const refused = result(name);
      expect(refused.exitCode, refused.all).toBe(2);
      expect(refused.stderr).toBe(
        `agent-pipeline: [INPUT_INVALID] --id "-x": ${kind} id "-x" starts with "-", which a command line reads as an option (\`agent-pipeline ${command} -x\` would fail); choose an id that starts with a letter or digit`,
      );
    }
    const approve = result('approve allow');
    expect(approve.exitCode, approve.stderr).toBe(2);
    expect(approve.stderr).toContain('is not a tool name');
  });
});
