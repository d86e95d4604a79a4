import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { checkWorkerHealth } from '../../src/worker/health-file.js';
import { CLI, eventually } from './cli-helpers.js';

describe('agent-pipeline worker start', () => {
  let scratch: string;
  beforeAll(async () => {
    scratch = await mkdtemp(path.join(tmpdir(), 'worker-start-log-'));
  });
  afterAll(async () => rm(scratch, { recursive: true, force: true }));

  test('logs no warning that its activity-only owner queues have no workflows', async () => {
    const env = {
      PATH: process.env.PATH,
      HOME: scratch,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      AGENT_PIPELINE_TASK_QUEUE: `worker-start-log-${Date.now()}`,
      AGENT_PIPELINE_WORKSPACES: path.join(scratch, 'workspaces'),
      AGENT_PIPELINE_HEALTH_FILE: path.join(scratch, 'worker.health'),
      AGENT_PIPELINE_SANDBOX: 'auto',
    };
    const worker = execa('node', [CLI, 'worker'], { env, extendEnv: false, reject: false, stdin: 'ignore', forceKillAfterDelay: 60_000 });
    await eventually(() => checkWorkerHealth(env), (problem) => problem === undefined, 60_000, 'the worker polling');
    worker.kill('SIGTERM');
    const stopped = await worker;
    expect(stopped.exitCode, String(stopped.stderr)).toBe(0);
    const logs = String(stopped.stderr).split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
    // Its three Workers all started (the shared queue's and the owner's two), and none said it has no workflows.
    const started = logs.filter((l) => l.message === 'Worker state changed' && l.state === 'RUNNING').map((l) => l.taskQueue);
    expect(started).toHaveLength(3);
    // The SDK's words, as it writes them: the test does not take them from the code that drops them.
    expect(logs.filter((l) => /No workflows registered/.test(String(l.message)))).toEqual([]);
  });
});
