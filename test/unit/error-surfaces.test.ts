import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ScheduleNotFoundError, WorkflowUpdateRPCTimeoutOrCancelledError } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { execa } from 'execa';
import { describe, expect, test } from 'vitest';
import { cliMessageOf, InvalidRequestError } from '../../src/errors.js';
import { connectTemporal } from '../../src/library/connection.js';
import { toLibraryError } from '../../src/library/temporal-errors.js';
import { resolveInputs } from '../../src/library/load-pipeline.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/** What a person at the command line never wrote: library calls, their options, the testing entry point. */
const LIBRARY_WORDS = /client\.|\(\)|createPipelineWorker|startDevServer|`address` option|\{ ?[a-z]+(:| ?\})|idConflictPolicy|the library's/;

async function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => expect.unreachable('expected a rejection') as never,
    (err: unknown) => err as Error,
  );
}

/** Errors the library makes that the CLI shows, each with the CLI's fix that replaces the library's. */
async function libraryErrors(): Promise<[what: string, err: Error, libraryFix: RegExp, cliFix: RegExp][]> {
  const required = parsePipeline('name: p\ninputs:\n  topic: { required: true }\nstages:\n  - { id: a, prompt: Write about the topic. }\n', 'p.yaml');
  let missingInput: Error | undefined;
  try {
    resolveInputs(required, 'p.yaml', {});
  } catch (err) {
    missingInput = err as Error;
  }
  return [
    ['an unknown run', toLibraryError(new WorkflowNotFoundError('not found', 'r1', undefined)) as Error, /`client\.list\(\)`/, /`agent-pipeline list` shows the runs$/],
    ['an unknown schedule', toLibraryError(new ScheduleNotFoundError('nf', 's1')) as Error, /`client\.schedules\.list\(\)`/, /`agent-pipeline schedule list` shows the schedules$/],
    ['a request no worker took', toLibraryError(new WorkflowUpdateRPCTimeoutOrCancelledError('timed out')) as Error, /createPipelineWorker/, /\(`agent-pipeline worker`\)$/],
    ['a missing input', missingInput!, /inputs: \{ topic: \.\.\. \}/, /give it with `--input topic=\.\.\.`$/],
    ['no Temporal', await rejection(connectTemporal({ address: '127.0.0.1:1', env: {} })), /startDevServer.*`address` option/, /Start a local server \(`agent-pipeline dev`\), or point TEMPORAL_ADDRESS at your cluster/],
  ];
}

describe('errors the library makes, as the library and as the command line say them', () => {
  test('the library names its own calls and options for a library user', async () => {
    for (const [what, err, libraryFix] of await libraryErrors()) expect(err.message, what).toMatch(libraryFix);
  });

  test('the command line names commands and flags instead, and no library call', async () => {
    for (const [what, err, , cliFix] of await libraryErrors()) {
      const shown = cliMessageOf(err);
      expect(shown, what).toMatch(cliFix);
      expect(shown, what).not.toMatch(LIBRARY_WORDS);
      // The same problem, said the same way up to the fix.
      expect(shown.slice(0, 20), what).toBe(err.message.slice(0, 20));
    }
  });

  test('an error with no command-line wording is shown with its message', () => {
    expect(cliMessageOf(new InvalidRequestError('INVALID_REQUEST', '[INVALID_REQUEST] plain'))).toBe('[INVALID_REQUEST] plain');
    expect(cliMessageOf('text')).toBe('text');
  });
});

describe('agent-pipeline prints the command-line wording', () => {
  const cli = (args: string[]) =>
    execa('node', [path.join(PROJECT_ROOT, 'bin', 'agent-pipeline.js'), ...args], { env: { PATH: process.env.PATH, TEMPORAL_ADDRESS: '127.0.0.1:1' }, extendEnv: false, reject: false, stdin: 'ignore' });

  test('for a Temporal it cannot reach (exit 3) and a missing input (exit 2)', async () => {
    const unreachable = await cli(['status', 'some-run']);
    expect(unreachable.exitCode).toBe(3);
    expect(String(unreachable.stderr)).toMatch(/^agent-pipeline: \[TEMPORAL_UNREACHABLE\] .*Start a local server \(`agent-pipeline dev`\)/);
    expect(String(unreachable.stderr)).not.toMatch(LIBRARY_WORDS);
    const dir = await mkdtemp(path.join(tmpdir(), 'error-surfaces-'));
    try {
      await writeFile(path.join(dir, 'p.yaml'), 'name: p\ninputs:\n  topic: { required: true }\nstages:\n  - { id: a, prompt: Write about the topic. }\n');
      const missing = await cli(['start', path.join(dir, 'p.yaml')]);
      expect(missing.exitCode).toBe(2);
      expect(String(missing.stderr)).toMatch(/^agent-pipeline: \[INPUT_INVALID\] .* requires input "topic"; give it with `--input topic=\.\.\.`$/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
