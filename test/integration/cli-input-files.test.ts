import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunJson } from '../../src/cli/json.js';
import type { ScheduleJson } from '../../src/library/schedule-spec.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { CLI, parseJson, runCli, runCliCommands, type CliResult } from './cli-helpers.js';

/** Runs `agent-pipeline ARGS` with `stdin` piped in. */
async function runCliWithStdin(args: readonly string[], env: NodeJS.ProcessEnv, stdin: string): Promise<CliResult> {
  const result = await execa('node', [CLI, ...args], { env, extendEnv: false, reject: false, timeout: 120_000, input: stdin, all: true });
  return { exitCode: result.exitCode, stdout: String(result.stdout), stderr: String(result.stderr), all: String(result.all) };
}

const PIPELINE = `name: cli-input-files
inputs:
  notes: { required: true }
  topic: { default: tea }
defaults: { backend: anthropic-api, model: sonnet, retries: 0, timeout: 2m, heartbeatTimeout: 1m }
stages:
  - id: read
    prompt: "Read these notes about {{inputs.topic}}: {{inputs.notes}}"
`;

describe('--input name=@file and name=@- as a user runs them', () => {
  let harness: Harness;
  let dir: string;
  let pipeline: string;
  /** 300 KB: more than the OS takes as one command-line argument (128 KB on Linux). */
  const big = Array.from({ length: 6_000 }, (_, i) => `note ${String(i).padStart(5, '0')}: ${'x'.repeat(38)}\n`).join('');
  const scheduleId = `cli-input-files-${Math.random().toString(36).slice(2, 8)}`;

  beforeAll(async () => {
    harness = await createHarness('cli-input-files', {
      scenario: { rules: [], fallback: { text: 'Read.\n```json\n{"success": true, "summary": "Read the notes.", "outputs": {}}\n```' } },
    });
    dir = await mkdtemp(path.join(tmpdir(), 'cli-input-files-'));
    pipeline = await harness.writePipeline('input-files', PIPELINE);
    await writeFile(path.join(dir, 'notes.md'), big);
  });
  afterAll(async () => {
    await harness?.client.schedule.getHandle(scheduleId).delete().catch(() => {});
    await harness?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('a 300 KB value read from a file reaches the run and the agent', async () => {
    expect(big.length).toBeGreaterThan(300_000);
    const result = await runCli(['start', pipeline, '--input', `notes=@${path.join(dir, 'notes.md')}`, '--input', 'topic=@@home', '--wait', '--json'], harness.env, 120_000);
    expect(result.exitCode, result.stderr).toBe(0);
    const run = parseJson<RunJson>(result);
    expect(run.status).toBe('completed');
    expect(run.inputs.notes).toBe(big);
    expect(run.inputs.topic).toBe('@home');
    const request = harness.modelServer.requests().find((r) => JSON.stringify(r.body).includes('note 05999'));
    expect(request, 'the agent was given the whole file').toBeDefined();
  });

  test('a 300 KB value piped to standard input reaches the run', async () => {
    const result = await runCliWithStdin(['start', pipeline, '--input', 'notes=@-', '--wait', '--json'], harness.env, big);
    expect(result.exitCode, result.stderr).toBe(0);
    expect(parseJson<RunJson>(result).inputs.notes).toBe(big);
  });

  test('schedule create and update read @file and @- into the runs they start', async () => {
    const created = await runCliWithStdin(['schedule', 'create', pipeline, '--every', '1h', '--paused', '--id', scheduleId, '--input', 'notes=@-'], harness.env, big);
    expect(created.exitCode, created.stderr).toBe(0);
    await writeFile(path.join(dir, 'short.md'), 'short notes');
    // Back to back in one process (a command costs a Node process); `schedule create` above ran as a user runs it.
    const [before, updated, after] = await runCliCommands(
      [['schedule', 'describe', scheduleId, '--json'], ['schedule', 'update', pipeline, '--id', scheduleId, '--input', `notes=@${path.join(dir, 'short.md')}`], ['schedule', 'describe', scheduleId, '--json']],
      harness.env,
    );
    expect(parseJson<ScheduleJson>(before).inputs.notes).toBe(big);
    expect(updated.exitCode, updated.stderr).toBe(0);
    expect(parseJson<ScheduleJson>(after).inputs).toEqual({ notes: 'short notes', topic: 'tea' });
  });

  test('a missing file or a folder fails before anything starts, naming the flag and the file', async () => {
    const missing = path.join(dir, 'nope.md');
    const result = await runCli(['start', pipeline, '--input', `notes=@${missing}`], harness.env);
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toBe(`agent-pipeline: [FILE_NOT_FOUND] --input notes=@${missing}: cannot read ${missing} (no such file); give the path of a text file, or @@ to start a value with @`);
    const folder = await runCli(['schedule', 'create', pipeline, '--every', '1h', '--input', `notes=@${dir}`], harness.env);
    expect(folder.exitCode).toBe(2);
    expect(folder.stderr).toContain(`[FILE_UNREADABLE] --input notes=@${dir}: ${dir} is not a regular file`);
  });
});
