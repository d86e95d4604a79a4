import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { inject } from 'vitest';
import { withStageLeases } from '../../src/activities/leases/stage-leases.js';
import type { StageAttemptInput } from '../../src/contracts/stage-attempt.js';
import type { StageResult } from '../../src/pipeline/stage-result.js';
import { installQuietRuntime } from '../helpers/harness.js';
import { WORKFLOW_BUNDLE } from '../helpers/project-paths.js';
import { closeTestConnection, stopTestWorker } from '../helpers/teardown.js';

/*
 * An attempt waiting for a key heartbeats on its own clock, not only when the key's workflow answers: on a loaded host
 * the answers came late, the attempt missed its heartbeat timeout, and Temporal retried it until its retries were
 * spent without the stage ever running. Here the key's workflow has no worker at first, so it cannot answer at all:
 * the waiting attempt (the real stage-lease wrapper, in Temporal's activity test environment, on a real server) must
 * keep heartbeating, and run its stage once a worker comes.
 */

const taskQueue = `test-lease-wait-${Math.random().toString(36).slice(2, 8)}`;
let connection: Connection;
let client: Client;

beforeAll(async () => {
  installQuietRuntime();
  connection = await Connection.connect({ address: inject('temporalAddress') });
  client = new Client({ connection });
});

afterAll(async () => {
  await closeTestConnection('lease-wait-heartbeats', connection);
});

describe('a stage attempt waiting for a key', () => {
  test('heartbeats while the key workflow does not answer, and runs its stage once it does', { timeout: 120_000 }, async () => {
    const env = new MockActivityEnvironment(
      { taskQueue, heartbeatTimeoutMs: 3_000, activityId: 'work', attempt: 1, workflowExecution: { workflowId: `lease-wait-${taskQueue}`, runId: 'run-1' } },
      { client },
    );
    const beats: number[] = [];
    env.on('heartbeat', () => beats.push(Date.now()));
    let ran = false;
    const input = {
      runId: `lease-wait-${taskQueue}`,
      leases: [{ key: `test:wait:${taskQueue}`, concurrency: 1 }],
      stage: { id: 'work', heartbeatTimeoutMs: 3_000 },
    } as unknown as StageAttemptInput;
    const started = Date.now();
    const attempt = env.run(
      withStageLeases(async () => {
        ran = true;
        return { status: 'completed' } as unknown as StageResult;
      }),
      input,
    );
    // Four heartbeat timeouts' worth of waiting with no answer: a worker this quiet would have been given up for dead.
    await new Promise((resolve) => setTimeout(resolve, 12_000));
    expect(ran).toBe(false);
    const gaps = [started, ...beats].map((at, i, all) => (i === 0 ? 0 : at - all[i - 1]));
    expect(beats.length, `heartbeats at ${beats.map((at) => at - started).join(', ')} ms`).toBeGreaterThanOrEqual(3);
    expect(Math.max(...gaps, Date.now() - (beats.at(-1) ?? started))).toBeLessThan(3_000);

    const workerConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
    const worker = await Worker.create({ connection: workerConnection, taskQueue, workflowBundle: { codePath: WORKFLOW_BUNDLE }, shutdownForceTime: '30s' });
    const running = worker.run();
    try {
      await expect(attempt).resolves.toEqual({ status: 'completed' });
      expect(ran).toBe(true);
    } finally {
      await stopTestWorker('lease-wait-heartbeats', worker, running);
      await closeTestConnection('lease-wait-heartbeats worker', workerConnection);
    }
  });
});
