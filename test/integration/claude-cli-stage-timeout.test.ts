import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { STAGE_MARKER } from '../../src/activities/process/sweep.js';
import type { RecordedRequest } from '../../src/dev/model-server.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { commandLine, processesWith, REPORT, waitFor } from './claude-cli-world.js';
import { expectNoStageLeftRunning } from './workflow-helpers.js';

/*
 * Issue 10 item 7: a stage `timeout` (Temporal's start-to-close timeout of one attempt) ends a CLI agent whose tool
 * runs far longer: the agent and the tool are stopped (SIGTERM first: the tool's EXIT trap runs), and the next
 * attempt resumes the same Claude session and finishes.
 */

const TASK = 'Task: outlive the timeout';

let harness: Harness;
/** Written by the tool's EXIT trap, in the run's workspace. */
const TRAP_FILE = 'tool-stopped';

beforeAll(async () => {
  harness = await createHarness('claude-cli-timeout', {
    env: { AGENT_PIPELINE_KILL_GRACE: '5s' },
    scenario: {
      rules: [
        {
          name: 'timeout',
          match: TASK,
          repeatLastTurn: true,
          turns: [
            { text: 'First step.', tool: { name: 'Bash', input: { command: 'echo one > first.txt' } } },
            { text: 'A step longer than the timeout.', tool: { name: 'Bash', input: { command: `trap 'date +%s%3N > "$PWD/${TRAP_FILE}"' EXIT; sleep 300` } } },
            { text: `Resumed and finished.\n${REPORT}` },
          ],
        },
      ],
    },
  });
});

afterAll(async () => {
  await harness?.close();
});

const agentProcesses = (): Promise<number[]> => processesWith(STAGE_MARKER, harness.workspacesRoot, 'prefix');

describe('a stage timeout', () => {
  test('stops the running agent and its tool, and the next attempt resumes the session', { timeout: 240_000 }, async () => {
    const yaml = [
      'name: timeout-test',
      // Long enough for the CLI to start on a loaded machine; far shorter than the tool's 300 s.
      'defaults: { backend: claude-cli, model: sonnet, timeout: 25s, heartbeatTimeout: 10s, retries: 1, permissionMode: dontAsk }',
      'stages:',
      '  - id: build',
      `    prompt: "${TASK}"`,
      '    allowedTools: [Bash]',
      '',
    ].join('\n');
    const handle = await harness.startYaml('timeout-test', yaml);
    await waitFor(
      async () => (await Promise.all((await agentProcesses()).map(commandLine))).some((c) => c.includes('sleep 300')),
      Boolean,
      'the agent to run its long tool',
      90_000,
    );
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    expect(state.stages[0]).toMatchObject({ status: 'completed', attempt: 2 });

    // The tool was stopped with SIGTERM (its EXIT trap ran), before the next attempt asked the model anything.
    // In the workspace: the agent's Bash runs in Claude Code's sandbox, which writes nowhere else.
    const trapFile = path.join(state.workspace!, TRAP_FILE);
    expect(existsSync(trapFile)).toBe(true);
    const stoppedAt = Number(await readFile(trapFile, 'utf8'));
    const requests = harness.modelServer.requests().filter((r) => r.rule === 'timeout');
    const resumed = requests.find((r) => (r.turn ?? 0) >= 2) as RecordedRequest;
    expect(resumed).toBeDefined();
    expect(stoppedAt).toBeLessThan(Date.parse(resumed.time));
    // Nothing of either attempt is left running.
    expect(await agentProcesses()).toEqual([]);
    // The same session, continued rather than started over.
    expect(resumed.headers['x-claude-code-session-id']).toBe(requests[0].headers['x-claude-code-session-id']);
    expect(JSON.stringify((resumed.body as { messages: unknown[] }).messages)).toContain('echo one > first.txt');
    expect((await stat(path.join(state.workspace!, 'first.txt'))).isFile()).toBe(true);
  });
});
