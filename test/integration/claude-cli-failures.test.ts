import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createCliWorld, failureOf, REPORT, TEST_API_KEY, waitFor, type CliWorld } from './claude-cli-world.js';

/*
 * Every way a CLI attempt fails, with the real `claude` binary: the catalogue type, whether Temporal
 * retries it, a message a person can act on, and never the API key.
 */

let world: CliWorld;

beforeAll(async () => {
  world = await createCliWorld({
    rules: [
      { match: 'Task: 401', turns: [{ error: { status: 401 } }] },
      { match: 'Task: 400', turns: [{ error: { status: 400, message: 'prompt is malformed' } }] },
      { match: 'Task: 404', turns: [{ error: { status: 404, type: 'not_found_error', message: 'model: no-such-model' } }] },
      { match: 'Task: 429 default', turns: [{ error: { status: 429, retryAfter: 30 } }] },
      { match: 'Task: 429 retried', turns: [{ error: { status: 429, retryAfter: 2 } }] },
      { match: 'Task: 529', turns: [{ error: { status: 529 } }] },
      { match: 'Task: 500', turns: [{ error: { status: 500 } }] },
      { match: 'Task: budget', turns: [{ text: `Expensive.\n${REPORT}`, usage: { input_tokens: 1_000_000 } }] },
      { match: 'Task: crash', turns: [{ text: 'slow...', repeat: 60, chunks: 60, chunkDelayMs: 500 }] },
    ],
  });
});

afterAll(async () => {
  await world?.close();
});

/** Asserts what every CLI failure must satisfy, and returns it. */
async function expectFailure(promise: Promise<unknown>, type: string, nonRetryable: boolean, message: RegExp) {
  const failure = await failureOf(promise);
  expect({ type: failure.type, nonRetryable: failure.nonRetryable }).toEqual({ type, nonRetryable });
  expect(failure.message).toMatch(message);
  expect(failure.message).toContain('stage work');
  expect(JSON.stringify([failure.message, failure.details])).not.toContain(TEST_API_KEY);
  return failure;
}

describe('a failing CLI attempt', () => {
  test.each([
    ['401', 'API_KEY_REJECTED', true, /answered 401 authentication_error.*check ANTHROPIC_API_KEY/],
    ['400', 'INVALID_REQUEST', true, /answered 400 invalid_request_error: API Error: 400 prompt is malformed/],
    ['404', 'INVALID_REQUEST', true, /answered 404 not_found_error: There's an issue with the selected model/],
    ['529', 'OVERLOADED', false, /answered 529 overloaded_error/],
    ['500', 'SERVER_ERROR', false, /answered 500 api_error/],
  ] as const)('answered %s by the API fails as %s', async (status, type, nonRetryable, message) => {
    const attempt = await world.start({ task: `Task: ${status}` });
    const failure = await expectFailure(attempt.outcome, type, nonRetryable, message);
    expect(failure.details?.[0]).toMatchObject({ apiErrorStatus: Number(status), exitCode: 1 });
    if (status !== '400' && status !== '404') {
      // The CLI's own retry loop is off (CLAUDE_CODE_MAX_RETRIES=0): one request, not 180 s of hidden retries.
      // (On 400 and 404 the CLI itself tries once more with other request options.)
      const requests = world.server.requests().filter((r) => JSON.stringify(r.body).includes(`Task: ${status}`));
      expect(requests).toHaveLength(1);
    }
  });

  test('rate limited (429) is retryable; the CLI does not pass retry-after on, so Temporal backs off', async () => {
    const attempt = await world.start({ task: 'Task: 429 default' });
    const failure = await expectFailure(attempt.outcome, 'RATE_LIMITED', false, /answered 429 rate_limit_error/);
    expect(failure.nextRetryDelay).toBeUndefined();
  });

  test('rate limited with the CLI allowed one retry of its own uses the retry-after it announced', async () => {
    const attempt = await world.start({ task: 'Task: 429 retried', env: { CLAUDE_CODE_MAX_RETRIES: '1' } });
    const failure = await expectFailure(attempt.outcome, 'RATE_LIMITED', false, /answered 429/);
    // retry-after: 2 → the CLI's api_retry event announces about 2 s (plus jitter).
    expect(Number(failure.nextRetryDelay)).toBeGreaterThanOrEqual(2_000);
    expect(Number(failure.nextRetryDelay)).toBeLessThan(10_000);
  });

  test('an unreachable API fails as a retryable CONNECTION_ERROR', async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const attempt = await world.start({ task: 'Task: refused', env: { ANTHROPIC_BASE_URL: `http://127.0.0.1:${closedPort}` } });
    await expectFailure(attempt.outcome, 'CONNECTION_ERROR', false, /could not reach the model API \(connection_failed\).*ECONNREFUSED/);
  });

  test('a missing claude binary fails as CLI_NOT_INSTALLED and says how to fix it', async () => {
    const attempt = await world.start({ task: 'Task: 401', env: { CLAUDE_BIN: '/nonexistent/claude' } });
    await expectFailure(attempt.outcome, 'CLI_NOT_INSTALLED', true, /not found \(looked for CLAUDE_BIN=\/nonexistent\/claude\).*run `npm ci` in the agent-pipeline folder, or set CLAUDE_BIN/);
  });

  test('a worker with no credentials at all fails as API_KEY_MISSING, naming every way Claude Code authenticates', async () => {
    const attempt = await world.start({ task: 'Task: 401', env: { ANTHROPIC_API_KEY: undefined } });
    await expectFailure(
      attempt.outcome,
      'API_KEY_MISSING',
      true,
      /no credentials.*set one of ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN .*CLAUDE_CODE_USE_BEDROCK=1 .*AWS_BEARER_TOKEN_BEDROCK.*CLAUDE_CODE_USE_VERTEX=1 .*ANTHROPIC_VERTEX_PROJECT_ID.*AGENT_PIPELINE_CLAUDE_SETTINGS .*apiKeyHelper in the environment of the worker/,
    );
  });

  test('a stage over its budget fails as BUDGET_EXCEEDED, not retried', async () => {
    const attempt = await world.start({ task: 'Task: budget', request: { maxBudgetUsd: 0.5 } });
    const failure = await expectFailure(attempt.outcome, 'BUDGET_EXCEEDED', true, /reached its cap \(Reached maximum budget \(\$0\.5\)\)/);
    expect(failure.details?.[0]).toMatchObject({ subtype: 'error_max_budget_usd' });
  });

  test('a CLI that dies without a result fails as a retryable CLI_CRASHED', async () => {
    const attempt = await world.start({ task: 'Task: crash' });
    const lock = path.join(attempt.stageDir, 'agent.lock');
    const { pid } = await waitFor(
      async () => JSON.parse(await readFile(lock, 'utf8').catch(() => '{}')) as { pid?: number },
      (content) => typeof content.pid === 'number' && attempt.heartbeats.length > 0,
      'the agent to start streaming',
    );
    process.kill(pid as number, 'SIGKILL');
    await expectFailure(attempt.outcome, 'CLI_CRASHED', false, /was killed by SIGKILL without a final result/);
  });

  test('CLI_CRASHED details carry the tail of what the CLI wrote to stderr', async () => {
    // The real CLI refuses a budget flag it cannot use (run-stage never sends one): it says why on stderr and exits
    // without a result.
    const attempt = await world.start({ task: 'Task: refused flags', request: { maxBudgetUsd: -1 } });
    const failure = await expectFailure(attempt.outcome, 'CLI_CRASHED', false, /without a final result: .*--max-budget-usd must be a number greater than 0/);
    const details = failure.details?.[0] as { stderrTail?: string; exitCode?: number };
    expect(details.stderrTail).toMatch(/option '--max-budget-usd <amount>' argument '-1' is invalid/);
    expect(details.exitCode).not.toBe(0);
  });
});
