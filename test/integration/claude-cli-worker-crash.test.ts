import { writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { STAGE_MARKER } from '../../src/activities/process/sweep.js';
import type { RecordedRequest } from '../../src/dev/model-server.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { commandLine, processesWith, REPORT, waitFor } from './claude-cli-world.js';
import { WorkerProcesses } from './fault-helpers.js';

/*
 * A worker killed with SIGKILL in the middle of a stage: its agent and the Bash tool the agent
 * started (in a session of its own, out of reach of a process-group kill) are gone within moments,
 * and the retry, taken by another worker, resumes the same Claude session instead of starting over.
 * Workers run as real processes (`node dist/worker.js`; `npm test` builds first).
 */

const TASK = 'Task: crash and resume';

let harness: Harness;
let pipelineFile: string;
const workers = new WorkerProcesses();

beforeAll(async () => {
  harness = await createHarness('claude-cli-crash', {
    worker: false,
    scenario: {
      rules: [
        {
          name: 'crash',
          match: TASK,
          repeatLastTurn: true,
          turns: [
            { text: 'First step.', tool: { name: 'Bash', input: { command: 'echo one > first.txt' } } },
            { text: 'A long step.', tool: { name: 'Bash', input: { command: 'echo started > second.txt && sleep 300' } } },
            { text: `Resumed and finished.\n${REPORT}` },
          ],
        },
      ],
    },
  });
  pipelineFile = harness.runDir('pipeline.yaml');
  await writeFile(
    pipelineFile,
    [
      'name: crash-test',
      'defaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 5s, retries: 2, permissionMode: dontAsk }',
      'stages:',
      '  - id: build',
      `    prompt: "${TASK}"`,
      '    allowedTools: [Bash]',
      '',
    ].join('\n'),
  );
});

afterAll(async () => {
  await workers.killAll();
  await harness?.close();
});

/** The agent processes of this test's runs: the CLI and its tools carry the stage marker. */
function agentProcesses(): Promise<number[]> {
  return processesWith(STAGE_MARKER, harness.workspacesRoot, 'prefix');
}

function messagesOf(request: RecordedRequest): { role: string; content: unknown }[] {
  return (request.body as { messages: { role: string; content: unknown }[] }).messages;
}

describe('a worker killed in the middle of a stage', () => {
  test('takes no agent or tool process with it undead, and the retry resumes the same session', { timeout: 180_000 }, async () => {
    const first = workers.start(harness.env);
    const handle = await harness.start(pipelineFile);
    const running = await waitFor(
      async () => {
        const pids = await agentProcesses();
        const commands = await Promise.all(pids.map(commandLine));
        return commands.includes('sleep 300') ? pids : [];
      },
      (pids) => pids.length > 0,
      'the agent to run `sleep 300` in a Bash tool',
      90_000,
    ).catch((err: Error) => {
      const requests = harness.modelServer.requests().map((r) => `${r.rule}#${r.turn} ${r.status}`);
      throw new Error(`${err.message}\nmodel requests: ${requests.join(', ')}\nworker output: ${workers.output()}`);
    });
    expect(running.length).toBeGreaterThanOrEqual(2);

    first.kill('SIGKILL');
    await first;
    // The worker's watchdog stops the tool in its own session, then the CLI, which the kernel froze when the worker died.
    await waitFor(agentProcesses, (pids) => pids.length === 0, 'the agent and its tool to be gone', 5_000);

    const before = harness.modelServer.requests().length;
    void workers.start(harness.env);
    const state = await harness.finish(handle);
    expect(state.status).toBe('completed');
    expect(state.stages[0]).toMatchObject({ status: 'completed', attempt: 2 });

    const requests = harness.modelServer.requests().filter((r) => r.rule === 'crash');
    const killed = requests.slice(0, before).at(-1) as RecordedRequest;
    const [resumed] = harness.modelServer.requests().slice(before).filter((r) => r.rule === 'crash');
    // The retry's first request carries the earlier conversation, so the turn index goes on from there. (The
    // message in flight at the kill may be missing: the CLI records the session a moment behind the stream.)
    expect(resumed.turn).toBeGreaterThanOrEqual(2);
    expect(JSON.stringify(messagesOf(resumed))).toContain('echo one > first.txt');
    expect(JSON.stringify(messagesOf(resumed).at(-1))).toContain('was interrupted');
    expect(resumed.headers['x-claude-code-session-id']).toBe(killed.headers['x-claude-code-session-id']);
    expect(state.stages[0].result?.sessionId).toBe(killed.headers['x-claude-code-session-id']);
  });
});
