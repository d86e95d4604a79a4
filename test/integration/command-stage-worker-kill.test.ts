import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { STAGE_MARKER } from '../../src/activities/process/sweep.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { processesWith, waitFor } from './claude-cli-world.js';
import { WorkerProcesses } from './fault-helpers.js';
import { stageOf } from './workflow-helpers.js';

/*
 * A worker killed with SIGKILL while a command stage runs (issue 31): the command and what it started in the sandbox
 * are gone within moments (the worker's watchdog), and the retry, taken by another worker after the heartbeat timeout,
 * runs the command again. Workers run as real processes (`node dist/worker.js`), in the real sandbox.
 */

let harness: Harness;
const workers = new WorkerProcesses();

beforeAll(async () => {
  harness = await createHarness('command-stage-kill', { worker: false, scenario: { rules: [] }, env: { AGENT_PIPELINE_SANDBOX: 'required', AGENT_PIPELINE_KILL_GRACE: '1s' } });
});

afterAll(async () => {
  await workers.killAll();
  await harness?.close();
});

describe.skipIf(MISSING_SANDBOX_PACKAGES.length > 0)('a worker killed while a command stage runs', () => {
  test('leaves no process of the command behind, and the retry on another worker runs the command again', { timeout: 180_000 }, async () => {
    const run = 'echo "attempt" >> attempts.txt; if [ "$(wc -l < attempts.txt)" -gt 1 ]; then echo again; else (sleep 300 &); sleep 300; fi';
    const yaml = `name: cmd-kill\ndefaults: { heartbeatTimeout: 5s, retries: 2 }\nstages:\n  - id: long\n    run: ${JSON.stringify(run)}\n`;
    const first = workers.start(harness.env);
    const handle = await harness.startYaml('cmd-kill', yaml);
    const attempts = path.join(harness.runDir(handle.workflowId), 'attempts.txt');
    const stageDir = path.join(harness.runBookkeeping(handle.workflowId), 'stages', 'long');
    const commandProcesses = (): Promise<number[]> => processesWith(STAGE_MARKER, `${stageDir}#`, 'prefix');
    await waitFor(() => existsSync(attempts), Boolean, `the command to start (worker output: ${workers.output()})`, 90_000);
    await waitFor(commandProcesses, (pids) => pids.length >= 2, 'the command and its background sleep', 30_000);
    // The attempt's number reaches the server with its first heartbeat, and the stage that moves to another worker
    // counts on from there: a worker that dies before any heartbeat arrived leaves nothing to count from.
    const heartbeat = async (): Promise<unknown> => (await handle.describe()).raw.pendingActivities?.[0]?.lastHeartbeatTime;
    await waitFor(heartbeat, Boolean, 'the first heartbeat of the attempt', 30_000);

    first.kill('SIGKILL');
    await first;
    // setpriv's parent-death signal takes the sandbox's launcher, the worker's watchdog what runs in its session.
    await waitFor(commandProcesses, (pids) => pids.length === 0, 'every process of the command to be gone', 10_000);

    void workers.start(harness.env);
    const state = await harness.finish(handle);
    expect(state.status, JSON.stringify(state.stages)).toBe('completed');
    expect(stageOf(state, 'long')).toMatchObject({ status: 'completed', attempt: 2 });
    expect(stageOf(state, 'long').result?.answer).toBe('again');
    expect((await readFile(attempts, 'utf8')).trim().split('\n')).toHaveLength(2);
  });
});
