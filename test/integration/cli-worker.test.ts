import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Worker } from '@temporalio/worker';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, WORKFLOW_BUNDLE, type Harness } from '../helpers/harness.js';
import { stopTestWorker } from '../helpers/teardown.js';
import type { RunJson } from '../../src/cli/json.js';
import { createPipelineWorker } from '../../src/worker/create-worker.js';
import { checkWorkerHealth } from '../../src/worker/health-file.js';
import { CLI, CLI_FIXTURES, eventually, parseJson, runCli } from './cli-helpers.js';

describe('agent-pipeline worker', () => {
  let harness: Harness;
  let scratch: string;
  let spare: Worker | undefined;
  let spareDone: Promise<void> | undefined;

  beforeAll(async () => {
    harness = await createHarness('cli-worker', { scenario: path.join(CLI_FIXTURES, 'scenario.yaml'), worker: false });
    scratch = await mkdtemp(path.join(tmpdir(), 'cli-worker-'));
  });
  afterAll(async () => {
    await stopTestWorker('the spare worker', spare, spareDone);
    await harness?.close();
    await rm(scratch, { recursive: true, force: true });
  });

  test('SIGTERM drains: the running stage gets the grace time, is cancelled, and another worker finishes it; logs are JSON lines with run, stage and attempt', async () => {
    const env = {
      ...harness.env,
      AGENT_PIPELINE_SHUTDOWN_GRACE: '1s',
      AGENT_PIPELINE_LOG_LEVEL: 'DEBUG',
      AGENT_PIPELINE_HEALTH_FILE: path.join(scratch, 'worker.health'),
      // The run's stage retries on this worker's own queue, which nobody polls once it stopped: the run moves to the
      // spare worker after the owner window (3 s here, 60 s by default) and the unanswered ping.
      AGENT_PIPELINE_OWNER_TIMEOUT: '3s',
    };
    // execa's own SIGKILL 5 s after a SIGTERM would cut a drain short on a loaded machine (seen: no exit code); the
    // worker's own limits (grace 1 s, then the force timeout) are what this test checks.
    const worker = execa('node', [CLI, 'worker'], { env, extendEnv: false, reject: false, stdin: 'ignore', forceKillAfterDelay: 120_000 });
    // Waits on the health file in this process, then checks it once as a container would: polling the command started
    // a Node process with the worker's native runtime every half second.
    await eventually(() => checkWorkerHealth(env), (problem) => problem === undefined, 60_000, 'the worker polling');
    const healthy = await runCli(['worker', '--health-check'], env);
    expect(healthy.exitCode, healthy.stderr).toBe(0);

    const { runId } = parseJson<{ runId: string }>(await runCli(['start', path.join(CLI_FIXTURES, 'slow.yaml'), '--json'], env));
    // The agent is mid-answer (the scripted reply streams for several seconds) when the worker is told to stop.
    await eventually(async () => harness.modelServer.requests().filter((r) => r.rule === 'crawl').length, (n) => n > 0, 60_000, 'the agent calling the model');
    spare = await createPipelineWorker({ env: harness.env, taskQueue: harness.taskQueue, workflowBundlePath: WORKFLOW_BUNDLE });
    spareDone = spare.run();
    worker.kill('SIGTERM');
    const stopped = await worker;
    expect(stopped.exitCode, stopped.stderr).toBe(0);

    const logs = String(stopped.stderr).split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(logs.every((l) => typeof l.time === 'string' && typeof l.level === 'string' && typeof l.message === 'string')).toBe(true);
    expect(logs.find((l) => l.message === 'agent-pipeline worker polling')).toMatchObject({ taskQueue: harness.taskQueue, shutdownGraceMs: 1000 });
    expect(logs.some((l) => String(l.message).startsWith('shutting down') && l.signal === 'SIGTERM')).toBe(true);
    // Every line about the stage attempt names the run, the stage and the attempt (but the SDK's DEBUG "Activity
    // started", written before any interceptor can add the stage).
    const stageLines = logs.filter((l) => l.activityType === 'runStage' && l.message !== 'Activity started');
    expect(stageLines.map((l) => [l.level, l.message, l.outcome])).toEqual([
      ['INFO', 'stage attempt started', undefined],
      ['INFO', 'stage attempt ended', 'cancelled'],
      ['DEBUG', 'Activity completed as cancelled', undefined],
    ]);
    expect(stageLines.filter((l) => !(l.runId === runId && l.workflowId === runId && l.stage === 'crawl' && l.attempt === 1))).toEqual([]);
    expect(logs.at(-1)?.message).toBe('agent-pipeline worker stopped');
    expect((await runCli(['worker', '--health-check'], env)).exitCode).toBe(1);

    // The retry waits for the spare worker, which also takes over the run's workflow tasks: allow it time on a busy machine.
    const finished = await runCli(['watch', runId, '--json'], env, 180_000);
    expect(finished.exitCode, finished.stderr).toBe(0);
    const run = parseJson<RunJson>(finished);
    expect(run.status).toBe('completed');
    expect(run.stages[0].attempt).toBeGreaterThanOrEqual(2);
  }, 240_000);

  test('a bad setting stops the worker at once with the variable, the value and the fix', async () => {
    const result = await runCli(['worker'], { ...harness.env, AGENT_PIPELINE_MAX_CONCURRENT_STAGES: 'lots' });
    expect(result.exitCode, result.stderr).toBe(2);
    expect(result.stderr).toBe('agent-pipeline: [CONFIG_INVALID] AGENT_PIPELINE_MAX_CONCURRENT_STAGES=lots is not a whole number of 1 or more; unset it for the default 8');
  });

  test('connection settings it cannot read, or no Temporal at the address, end the worker with 2 or 3, never a hang', async () => {
    // Once started, the SDK's runtime held the process open after such a failure, deaf to SIGTERM.
    const profile = await runCli(['worker'], { ...harness.env, TEMPORAL_PROFILE: 'nope' }, 60_000);
    expect(profile.exitCode, profile.stderr).toBe(2);
    expect(profile.stderr).toContain('[CONFIG_INVALID] cannot load the Temporal connection settings');
    expect(profile.stderr).toContain('profile "nope"');
    const refused = await runCli(['worker'], { ...harness.env, TEMPORAL_ADDRESS: '127.0.0.1:1' }, 60_000);
    expect(refused.exitCode, refused.stderr).toBe(3);
    expect(refused.stderr).toBe(
      'agent-pipeline: [TEMPORAL_UNREACHABLE] the worker cannot reach Temporal at 127.0.0.1:1 (connection refused). Start a server (`agent-pipeline dev`), or point ' +
        'TEMPORAL_ADDRESS at your cluster (plus TEMPORAL_NAMESPACE, and TEMPORAL_API_KEY or TEMPORAL_TLS_CLIENT_CERT_PATH/KEY_PATH), or choose a profile with TEMPORAL_PROFILE.',
    );
  });
});
