import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseJson, runCli } from './cli-helpers.js';

/*
 * What a user is told about bad input, through the real command: the bad value and what is allowed, the file,
 * and exit 2. No server is needed (or reachable): every check happens before the command connects.
 */

const OFFLINE = { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: '127.0.0.1:1' };
const NO_STACK = /^\s+at /m;

describe('bad input', () => {
  let dir: string;
  const file = (name: string): string => path.join(dir, name);

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
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  test('a rejected value names itself and what is allowed, in validate and start', async () => {
    const validate = await runCli(['validate', file('values.yaml')], OFFLINE);
    expect(validate.exitCode, validate.stderr).toBe(2);
    expect(validate.stdout).toContain(`${file('values.yaml')}:6 stages[0].backend: "gpt-cli" is not a backend; use claude-cli or anthropic-api`);
    expect(validate.stdout).toContain(`${file('values.yaml')}:2 defaults.retries: 200 is too large; use a whole number from 0 to 100`);
    expect(validate.stdout).toContain(`${file('values.yaml')}:2 defaults.timeout: "30 minutes" is not a duration; use a string such as "90s", "30m", "2h" or "1d"`);

    const start = await runCli(['start', file('values.yaml')], OFFLINE);
    expect(start.exitCode, start.stderr).toBe(2);
    expect(start.stderr).toContain('stages[0].backend: "gpt-cli" is not a backend; use claude-cli or anthropic-api');
    expect(start.stderr).not.toMatch(NO_STACK);
  });

  test('start refuses what validate finds, with the same problems (issue 21)', async () => {
    // A one-word prompt that names no file and an undeclared input: they used to pass start and fail at run time.
    await writeFile(file('late.yaml'), ['name: late', 'stages:', '  - id: a', '    prompt: implemnt', '  - id: b', '    prompt: Use {{inputs.nope}}.', ''].join('\n'));
    const validate = await runCli(['validate', file('late.yaml')], OFFLINE);
    expect(validate.exitCode, validate.stderr).toBe(2);
    const problems = validate.stdout.split('\n').filter((l) => l.startsWith('  '));
    expect(problems).toEqual([
      expect.stringContaining(`${file('late.yaml')}:4 stages[0].prompt: prompt "implemnt" looks like a file name but matches no file`),
      expect.stringContaining(`${file('late.yaml')}:6 stages[1].prompt {{inputs.nope}}: unknown template variable`),
    ]);

    const start = await runCli(['start', file('late.yaml')], OFFLINE);
    expect(start.exitCode, start.stderr).toBe(2);
    expect(start.stderr).toContain(`[PIPELINE_INVALID] ${file('late.yaml')} is not a valid pipeline (2 problems`);
    for (const problem of problems) expect(start.stderr).toContain(problem);
    expect(start.stderr).not.toMatch(NO_STACK);
  });

  test('a YAML alias bomb is exit 2 naming the file, in validate and start', async () => {
    const validate = await runCli(['validate', file('bomb.yaml'), '--json'], OFFLINE);
    expect(validate.exitCode, validate.stderr).toBe(2);
    expect(parseJson(validate)).toMatchObject({ valid: false, problems: [{ file: file('bomb.yaml'), field: '', message: expect.stringMatching(/^the YAML cannot be read: .*alias/i) }] });

    const start = await runCli(['start', file('bomb.yaml')], OFFLINE);
    expect(start.exitCode, start.stderr).toBe(2);
    expect(start.stderr).toContain(`[PIPELINE_INVALID] ${file('bomb.yaml')} is not a valid pipeline`);
    expect(start.stderr).toMatch(/the YAML cannot be read: .*alias/i);
    expect(start.stderr).not.toMatch(NO_STACK);
  });

  test('validate reports stage inputs and context paths that leave their folder', async () => {
    const validate = await runCli(['validate', file('paths.yaml')], OFFLINE);
    expect(validate.exitCode, validate.stderr).toBe(2);
    expect(validate.stdout.split('\n')).toEqual([
      `✘ ${file('paths.yaml')}: 2 problems`,
      `  ${file('paths.yaml')}:2 context[0]: "../brief.md" leaves the pipeline file's folder; context files are read relative to it, so keep them in that folder or below it`,
      `  ${file('paths.yaml')}:6 stages[0].inputs[0]: "../../etc/passwd" leaves the run's workspace; stage inputs are files earlier stages wrote in it, given relative to it (e.g. "docs/spec.md")`,
    ]);
  });

  test('a run input over the payload limit fails at start with exit 2, its size, the limit and the fix', async () => {
    // Bundled (the default), the file is over the bundle cap before the input is measured.
    const bundled = await runCli(['start', file('huge.yaml')], OFFLINE);
    expect(bundled.exitCode, bundled.stderr).toBe(2);
    expect(bundled.stderr).toContain('[BUNDLE_TOO_LARGE]');
    expect(bundled.stderr).not.toMatch(NO_STACK);

    const start = await runCli(['start', file('huge.yaml'), '--files-from-worker'], OFFLINE);
    expect(start.exitCode, start.stderr).toBe(2);
    expect(start.stderr).toMatch(/\[INPUT_TOO_LARGE\] the run's input is 2\.9 MB \(\d+ bytes\), over Temporal's payload limit of 2\.0 MB; the largest part is stages\[0\] \(a\) of .*huge\.yaml \(2\.9 MB\)\. Move large text into files/);
    expect(start.stderr).not.toContain('Blob data size');
    expect(start.stderr).not.toMatch(NO_STACK);
  });

  test('a run id that names a folder, or a tool name that reads as a flag, is exit 2 before connecting (issue 19)', async () => {
    await writeFile(file('fine.yaml'), 'name: fine\nstages: [{ id: a, prompt: Say hello. }]\n');
    for (const id of ['..', '.']) {
      const start = await runCli(['start', file('fine.yaml'), '--id', id], OFFLINE);
      expect(start.exitCode, start.stderr).toBe(2);
      expect(start.stderr).toContain(`[INPUT_INVALID] --id "${id}": "${id}" cannot be a run id`);
    }
    const approve = await runCli(['approve', 'some-run', '--allow=--dangerously-skip-permissions'], OFFLINE);
    expect(approve.exitCode, approve.stderr).toBe(2);
    expect(approve.stderr).toContain('is not a tool name');
  });
});
