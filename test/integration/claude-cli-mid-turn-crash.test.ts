import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { STAGE_MARKER } from '../../src/activities/process/sweep.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { processesWith, REPORT, waitFor } from './claude-cli-world.js';
import { runCli } from './cli-helpers.js';
import { WorkerProcesses } from './fault-helpers.js';
import { stageOf, waitForState } from './workflow-helpers.js';

/*
 * Issue 25, crashes: a worker killed while its agent waits for a person's decision mid-turn. The retry, on another
 * worker, resumes the session; the agent asks again and that request is the stage's wait now; the person's approval
 * reaches the new agent. Workers run as real processes (`node dist/worker.js`).
 */

const TASK = 'Task: ask, crash and ask again';
const CALL = { name: 'Bash', input: { command: 'echo made > crashed.txt', description: 'write it' } };

/** Sends `name` to `pid`, which may be gone already. */
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Gone.
  }
}

let harness: Harness;
const workers = new WorkerProcesses();

beforeAll(async () => {
  harness = await createHarness('claude-cli-mid-turn-crash', {
    worker: false,
    // The resumed conversation holds the call, its "interrupted" result and the CLI's own "No response requested."
    // reply, so the resumed agent's first request is turn 2: it asks for the same call again, then reports.
    scenario: { rules: [{ name: 'crash', match: TASK, turns: [{ tool: CALL }, { tool: CALL }, { tool: CALL }, { text: REPORT }] }] },
  });
});
afterAll(async () => {
  await workers.killAll();
  await harness?.close();
});

/** A wait's failure with the model's requests and the workers' output. */
function explain(err: Error): never {
  const requests = harness.modelServer.requests().map((r) => `${r.rule}#${r.turn} ${JSON.stringify((r.body as { messages: unknown[] }).messages).slice(-600)}`);
  throw new Error(`${err.message}\nmodel requests:\n${requests.join('\n')}\nworker output: ${workers.output()}`);
}

describe('a worker killed while its agent waits mid-turn', () => {
  // Its waits add up to 400 s, each failing with what the run, the model and the workers did: a timeout of the test
  // itself (once in CI, at 240 s) says nothing of where it stood.
  test('the retry elsewhere asks again, and the approval reaches the new agent', { timeout: 420_000 }, async () => {
    const first = workers.start(harness.env);
    const yaml =
      'name: crash-ask\ndefaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 5s, retries: 1 }\n' +
      `stages:\n  - id: work\n    prompt: "${TASK}"\n    allowedTools: [Read]\n    onPermissionRequest: ask\n`;
    const handle = await harness.startYaml('crash-ask', yaml);
    const firstAsk = await waitForState(handle, (s) => stageOf(s, 'work').waitingFor?.kind === 'tool_request', 120_000).catch(explain);
    const firstSince = stageOf(firstAsk, 'work').waitingFor!.since;

    // The agent goes with its worker, as when the worker's machine goes. Killed alone, the worker closes the agent's
    // stdin a moment before the kernel freezes it (setpriv --pdeathsig STOP), and the agent may fail its own pending
    // request and ask the model once more first, which changes the conversation this scenario scripts (seen on a
    // loaded machine; claude-cli-worker-crash.test.ts covers the agent stopping after its worker). Frozen first, it
    // cannot read that end of its input.
    const agents = await processesWith(STAGE_MARKER, harness.workspacesRoot, 'prefix');
    for (const pid of agents) signal(pid, 'SIGSTOP');
    first.kill('SIGKILL');
    await first;
    for (const pid of agents) signal(pid, 'SIGKILL');
    await waitFor(() => processesWith(STAGE_MARKER, harness.workspacesRoot, 'prefix'), (pids) => pids.length === 0, 'the waiting agent to be gone', 10_000);
    void workers.start(harness.env);

    // The retried attempt's agent asks again: a new wait replaces the one nobody can answer any more.
    const again = await waitForState(handle, (s) => (stageOf(s, 'work').waitingFor?.since ?? 0) > firstSince, 120_000).catch(explain);
    expect(stageOf(again, 'work').waitingFor?.request?.tool).toBe('Bash');
    const approved = await runCli(['approve', handle.workflowId, '--stage', 'work'], harness.env);
    expect(approved.exitCode, approved.stderr).toBe(0);

    const state = await waitForState(handle, (s) => ['completed', 'failed', 'timed_out', 'cancelled'].includes(s.status), 60_000).catch(explain);
    expect(state.status).toBe('completed');
    expect(stageOf(state, 'work')).toMatchObject({ status: 'completed', attempt: 2 });
    expect(await readFile(path.join(state.workspace!, 'crashed.txt'), 'utf8')).toBe('made\n');
    const requests = harness.modelServer.requests().filter((r) => r.rule === 'crash');
    expect(new Set(requests.map((r) => r.headers['x-claude-code-session-id'])).size).toBe(1);
  });
});
