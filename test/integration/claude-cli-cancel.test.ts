import { cancellationSignal, heartbeat } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DefaultLogger } from '@temporalio/worker';
import type { AttemptProgress } from '../../src/activities/backends/stage-backend.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { commandLine, createCliWorld, failureOf, stageProcesses, waitFor, type Attempt, type CliWorld } from './claude-cli-world.js';

/*
 * Cancelling an attempt stops the agent and the tool processes it started (SIGTERM to the group,
 * SIGKILL after the grace period), keeps the partial work, and reports the cancellation.
 */

let world: CliWorld;

beforeAll(async () => {
  world = await createCliWorld({
    rules: [
      {
        match: 'Task: long tool',
        turns: [{ text: 'Working.', tool: { name: 'Bash', input: { command: 'echo partial > partial.txt && sleep 300' } } }, { text: 'never reached' }],
      },
    ],
  });
});

afterAll(async () => {
  await world?.close();
});

/** Waits until the agent's Bash tool wrote its partial file and sleeps. */
async function waitForSleepingTool(dir: string, stageDir: string): Promise<number[]> {
  return waitFor(
    async () => {
      const pids = await stageProcesses(stageDir);
      const commands = await Promise.all(pids.map(commandLine));
      return existsSync(path.join(dir, 'partial.txt')) && commands.some((c) => c === 'sleep 300') ? pids : [];
    },
    (pids) => pids.length > 0,
    'the Bash tool to sleep',
  );
}

async function expectCancelledCleanly(attempt: Pick<Attempt, 'dir' | 'stageDir' | 'request'>): Promise<void> {
  expect(await stageProcesses(attempt.stageDir)).toEqual([]);
  expect(await readFile(path.join(attempt.dir, 'partial.txt'), 'utf8')).toBe('partial\n');
  expect((await readFile(attempt.request.transcriptPath, 'utf8')).length).toBeGreaterThan(0);
  expect(existsSync(path.join(attempt.stageDir, 'agent.lock'))).toBe(false);
}

describe('cancelling a CLI attempt', () => {
  test('stops the agent and its tool processes, keeps partial files, and rethrows the abort reason', async () => {
    const attempt = await world.start({ task: 'Task: long tool', stage: { allowedTools: ['Bash'] } });
    const running = await waitForSleepingTool(attempt.dir, attempt.stageDir);
    expect(running.length).toBeGreaterThanOrEqual(2);
    const reason = new Error('cancelled by the test');
    attempt.controller.abort(reason);
    expect(await failureOf(attempt.outcome)).toBe(reason);
    await expectCancelledCleanly(attempt);
  });

  test('reaches the agent from a Temporal activity cancellation and ends in a CancelledFailure', async () => {
    const env = new MockActivityEnvironment({ attempt: 1 }, { logger: new DefaultLogger('ERROR') });
    const beats: AttemptProgress[] = [];
    env.on('heartbeat', (details: AttemptProgress) => beats.push(details));
    let started: Attempt | undefined;
    const activity = async (): Promise<unknown> => {
      started = await world.start({
        task: 'Task: long tool',
        stage: { allowedTools: ['Bash'] },
        request: { signal: cancellationSignal(), heartbeat: (progress) => heartbeat(progress) },
      });
      return started.outcome;
    };
    const result = env.run(activity);
    result.catch(() => undefined);
    const attempt = (await waitFor(() => started, (a) => a !== undefined, 'the attempt to start')) as Attempt;
    await waitForSleepingTool(attempt.dir, attempt.stageDir);
    env.cancel();
    const failure = await failureOf(result);
    expect(failure.name).toBe('CancelledFailure');
    expect(beats.some((b) => typeof b.sessionId === 'string')).toBe(true);
    await expectCancelledCleanly(attempt);
  });

  test('kills an agent that ignores SIGTERM once the grace period is over', async () => {
    const attempt = await world.start({
      task: 'Task: stubborn',
      env: { CLAUDE_BIN: path.join(PROJECT_ROOT, 'test', 'fixtures', 'claude-ignores-sigterm.sh') },
      options: { killGraceMs: 500 },
    });
    await waitFor(() => stageProcesses(attempt.stageDir), (pids) => pids.length >= 2, 'the fake agent and its child');
    const reason = new Error('cancelled by the test');
    attempt.controller.abort(reason);
    expect(await failureOf(attempt.outcome)).toBe(reason);
    expect(await stageProcesses(attempt.stageDir)).toEqual([]);
  });
});
