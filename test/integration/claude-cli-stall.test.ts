import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createCliWorld, failureOf, REPORT, stageProcesses, type CliWorld } from './claude-cli-world.js';

/*
 * Stall detection follows the agent's output, not the wall clock: silence longer than the stall
 * timeout (or the first-output timeout before any output) stops the agent as a retryable
 * AGENT_STALLED, while a stage that keeps producing output runs as long as it needs.
 */

let world: CliWorld;

beforeAll(async () => {
  world = await createCliWorld({
    rules: [
      { match: 'Task: silent start', turns: [{ text: 'too late', stallMs: 120_000 }] },
      {
        match: 'Task: silent later',
        turns: [{ text: 'Starting.', tool: { name: 'Bash', input: { command: 'echo step one' } } }, { text: 'too late', stallMs: 120_000 }],
      },
      // Ten chunks 700 ms apart: about 7 s of streaming, more than twice the 3 s stall timeout.
      { match: 'Task: slow but steady', turns: [{ text: `${'thinking... '.repeat(10)}\n${REPORT}`, chunks: 10, chunkDelayMs: 700 }] },
    ],
  });
});

afterAll(async () => {
  await world?.close();
});

describe('stall detection', () => {
  test('stops an agent with no first output within firstOutputTimeout', async () => {
    const attempt = await world.start({ task: 'Task: silent start', stage: { firstOutputTimeout: '2s', stallTimeout: '60s' } });
    const failure = await failureOf(attempt.outcome);
    expect(failure).toMatchObject({ type: 'AGENT_STALLED', nonRetryable: false });
    expect(failure.message).toContain('the agent produced no first output for 2.0s (firstOutputTimeout) and was stopped');
    expect(failure.message).toContain('raise `stallTimeout` (or `firstOutputTimeout`)');
    expect(await stageProcesses(attempt.stageDir)).toEqual([]);
  });

  test('stops an agent that goes silent after some output, and keeps its session for the retry', async () => {
    const attempt = await world.start({ task: 'Task: silent later', stage: { firstOutputTimeout: '60s', stallTimeout: '2s', allowedTools: ['Bash'] } });
    const failure = await failureOf(attempt.outcome);
    expect(failure).toMatchObject({ type: 'AGENT_STALLED', nonRetryable: false });
    expect(failure.message).toContain('the agent produced no output for 2.0s (stallTimeout) and was stopped');
    const details = failure.details?.[0] as { sessionId?: string; turns?: number };
    expect(details.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(attempt.heartbeats.at(-1)).toMatchObject({ sessionId: details.sessionId });
    expect(attempt.heartbeats.at(-1)?.turns).toBeGreaterThanOrEqual(1);
    expect(await stageProcesses(attempt.stageDir)).toEqual([]);
  });

  test('never stops an agent that keeps streaming, however long the stage takes', async () => {
    const attempt = await world.start({ task: 'Task: slow but steady', stage: { stallTimeout: '3s', firstOutputTimeout: '60s' } });
    const outcome = await attempt.outcome;
    expect(outcome.text).toContain(REPORT);
    expect(outcome.durationMs).toBeGreaterThan(3_000);
  });
});
