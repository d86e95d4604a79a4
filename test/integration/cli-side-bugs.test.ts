import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Worker } from '@temporalio/worker';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { writeEndedMarker } from '../../src/activities/workspace/remove-workspace.js';
import { runsFolder } from '../../src/activities/workspace/worker-folder.js';
import { toFolderName } from '../../src/activities/workspace/run-folder.js';
import { LEASE_WORKFLOW_TYPE, leaseWorkflowId } from '../../src/contracts/lease-messages.js';
import { PipelineClient } from '../../src/library/pipeline-client.js';
import { createPipelineWorker } from '../../src/worker/create-worker.js';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';
import { stopTestWorker } from '../helpers/teardown.js';
import { CLI, eventually, parseJson, runCli } from './cli-helpers.js';

/*
 * Issue 33, item 14: side bugs met on the way, each through the real command.
 */

const report = '```json\n{"success": true, "summary": "found claude", "outputs": {}}\n```';

/** PATH without any `node_modules/.bin` (npx and vitest add the project's, which holds a `claude`). */
function pathWithoutBins(): string {
  return (process.env.PATH ?? '').split(path.delimiter).filter((dir) => !dir.includes(`node_modules${path.sep}.bin`)).join(path.delimiter);
}

describe('node bin/agent-pipeline.js worker', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('bin-worker', { scenario: { rules: [{ match: 'Pipeline: find-claude', turns: [{ text: report }] }] }, worker: false });
  });
  afterAll(async () => harness?.close());

  test('runs a claude-cli stage with the claude installed with the package, though no claude is on PATH', async () => {
    const env = { ...harness.env, PATH: pathWithoutBins() };
    expect((await execa('sh', ['-c', 'command -v claude'], { env, extendEnv: false, reject: false })).exitCode, 'a claude on PATH would hide the bug').not.toBe(0);
    const worker = execa('node', [CLI, 'worker'], { env, extendEnv: false, reject: false, stdin: 'ignore', cwd: tmpdir() });
    try {
      const file = await harness.writePipeline('find-claude', 'name: find-claude\ndefaults: { backend: claude-cli, model: sonnet, retries: 0, heartbeatTimeout: 30s, allowedTools: [Read] }\nstages:\n  - id: find\n    prompt: Report.\n');
      const started = await runCli(['start', file, '--wait', '--json'], env);
      const run = parseJson<{ status: string; stages: { error?: { message: string } }[] }>(started);
      // Main looked for dist/node_modules/.bin/claude (one folder short), then PATH: CLI_NOT_INSTALLED.
      expect(run.status, run.stages[0].error?.message).toBe('completed');
    } finally {
      worker.kill('SIGTERM');
      await worker;
    }
  });
});

describe('agent-pipeline limits without the encryption key', () => {
  let harness: Harness;
  let worker: Worker;
  let running: Promise<void>;
  const encryptionKey = `k1:${randomBytes(32).toString('base64')}`;

  beforeAll(async () => {
    harness = await createHarness('limits-keyless', { scenario: { rules: [] }, worker: false, env: { AGENT_PIPELINE_ENCRYPTION_KEY: encryptionKey } });
    worker = await createPipelineWorker({
      env: harness.env,
      taskQueue: harness.taskQueue,
      workflowBundlePath: path.join(PROJECT_ROOT, 'dist', 'workflow-bundle-encrypted.js'),
    });
    running = worker.run();
  });
  afterAll(async () => {
    await stopTestWorker('the encrypting worker', worker, running);
    await harness?.close();
  });

  test('says CONFIG_INVALID and exits 2, without crashing on a key still being asked when it closed its connection', async () => {
    const client = await PipelineClient.connect({ env: harness.env });
    try {
      // Two runs hold a key each for their life (encrypted lease workflows), waiting at their gates.
      const yaml = (n: number): string => `name: held-${n}\nlimits: [{ key: "held-${n}-${harness.taskQueue}", concurrency: 1 }]\ndefaults: { backend: anthropic-api, model: haiku }\nstages:\n  - id: gate\n    approval: true\n`;
      const runs = await Promise.all([1, 2].map(async (n) => client.start(await harness.writePipeline(`held-${n}`, yaml(n)))));
      // Read through the library: the harness's own client has no key.
      await Promise.all(runs.map((run) => eventually(() => run.status(), (s) => s.state.stages[0].waitingFor !== undefined, 60_000, `${run.id} at its gate`)));
      // A key whose workflow's task was taken by a worker that then went away: its query waits on the server.
      const ghostQueue = `${harness.taskQueue}-gone`;
      await harness.client.workflow.start(LEASE_WORKFLOW_TYPE, { taskQueue: ghostQueue, workflowId: leaseWorkflowId(`ghost-${ghostQueue}`), args: [{ key: `ghost-${ghostQueue}` }] });
      const poll = { namespace: 'default', taskQueue: { name: ghostQueue }, identity: 'a worker that went away' };
      const task = await harness.client.connection.withDeadline(Date.now() + 30_000, () => harness.client.workflowService.pollWorkflowTaskQueue(poll));
      expect(task.taskToken?.length).toBeGreaterThan(0);

      const { AGENT_PIPELINE_ENCRYPTION_KEY: _key, ...keyless } = harness.env;
      const limits = await runCli(['limits'], keyless);
      expect(limits.stderr).toContain('[CONFIG_INVALID]');
      // Main printed the line, closed its connection under the key's query, and crashed when the query was retried.
      expect(limits.stderr).not.toMatch(/Channel has been shut down|\n\s+at /);
      expect(limits.exitCode, limits.stderr).toBe(2);
      await Promise.all(runs.map((run) => harness.client.workflow.getHandle(run.id).terminate('test over')));
      await harness.client.workflow.getHandle(leaseWorkflowId(`ghost-${ghostQueue}`)).terminate('test over');
    } finally {
      await client.close();
    }
  });
});

describe('agent-pipeline prune --older-than', () => {
  let root: string;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'prune-zero-'));
    env = { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: '127.0.0.1:1', AGENT_PIPELINE_WORKSPACES: root };
    // A run as the worker leaves it: its folder, and its records in the workers' own folder.
    await mkdir(path.join(root, toFolderName('just-ended')));
    const bookkeeping = path.join(runsFolder(root), toFolderName('just-ended'));
    await mkdir(bookkeeping, { recursive: true });
    await writeEndedMarker(bookkeeping, { runId: 'just-ended', status: 'completed', endedAt: Date.now() - 1000, pushed: true });
  });
  afterAll(async () => rm(root, { recursive: true, force: true }));

  test('0s removes every run that ended, however recently', async () => {
    const pruned = await runCli(['prune', '--older-than', '0s', '--force'], env);
    expect(pruned.exitCode, pruned.all).toBe(0);
    expect(pruned.stdout).toContain('removed  just-ended (completed, ended');
    expect(existsSync(path.join(root, toFolderName('just-ended')))).toBe(false);
  });

  test('a value that is no duration exits 2 with a message naming the flag and the value', async () => {
    const pruned = await runCli(['prune', '--older-than', 'soon', '--force'], env);
    expect(pruned.exitCode).toBe(2);
    expect(pruned.stderr).toContain("option '--older-than <duration>' argument 'soon' is invalid");
    expect(pruned.stderr).toContain('expected a duration such as 30s, 15m, 2h or 1d');
  });
});
