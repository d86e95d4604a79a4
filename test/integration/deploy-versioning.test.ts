import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { WorkflowHandle } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, Worker } from '@temporalio/worker';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunJson } from '../../src/cli/json.js';
import type { DeploymentStatus } from '../../src/worker/deployment-control.js';
import { PipelineClient } from '../../src/library/pipeline-client.js';
import { createPipelineWorker } from '../../src/worker/create-worker.js';
import { createHarness, WORKFLOW_BUNDLE, type Harness } from '../helpers/harness.js';
import { expectRunsReplay } from '../helpers/replay-check.js';
import { stopTestWorker } from '../helpers/teardown.js';
import { CLI, eventually, parseJson, runCli, runCliCommands } from './cli-helpers.js';
import { deploymentStatus, untilBuildPolled } from './deploy-helpers.js';

const INCOMPATIBLE_WORKFLOWS = fileURLToPath(new URL('../fixtures/versioning/incompatible-workflows.ts', import.meta.url));

const PIPELINE = `name: deploy-pinned
defaults: { backend: anthropic-api, retries: 0, timeout: 2m }
stages:
  - id: draft
    prompt: Draft the release note DEPLOY-PINNED.
  - id: ship
    needs: [draft]
    approval: { message: Ship it? }
`;

const SCENARIO = {
  rules: [{ name: 'draft', match: 'DEPLOY-PINNED', repeatLastTurn: true, turns: [{ text: '```json\n{"success": true, "summary": "Drafted.", "outputs": {}}\n```' }] }],
};

/** The build id each workflow task of the run was completed by, in order, and whether any workflow task failed. */
async function workflowTaskBuilds(handle: WorkflowHandle): Promise<{ builds: string[]; failedTasks: string[] }> {
  const events = (await handle.fetchHistory()).events ?? [];
  return {
    builds: events.flatMap((e) => (e.workflowTaskCompletedEventAttributes ? [e.workflowTaskCompletedEventAttributes.deploymentVersion?.buildId ?? '(unversioned)'] : [])),
    failedTasks: events.flatMap((e) => (e.workflowTaskFailedEventAttributes ? [e.workflowTaskFailedEventAttributes.failure?.message ?? '?'] : [])),
  };
}

// The second test has a deployment of its own and starts nothing: it runs beside the first.
describe.concurrent('deploys that never break a waiting run', () => {
  let harness: Harness;
  let scratch: string;
  let workerA: ResultPromise | undefined;
  let workerB: Worker | undefined;
  let workerBDone: Promise<void> | undefined;
  /** Reads runs in this process for the waits (what `status` reads, whichever build runs them): a command costs a Node process. */
  let library: PipelineClient | undefined;

  beforeAll(async () => {
    // Build B's workers run other workflow code on purpose: the runs on this queue replay on no one bundle.
    harness = await createHarness('deploy', { scenario: SCENARIO, worker: false, replayCheck: false });
    scratch = await mkdtemp(path.join(tmpdir(), 'deploy-versioning-'));
    library = await PipelineClient.connect({ env: harness.env });
  });
  afterAll(async () => {
    await library?.close();
    await stopTestWorker("build B's worker", workerB, workerBDone);
    workerA?.kill('SIGTERM');
    await workerA?.catch(() => undefined);
    await harness?.close();
    await rm(scratch, { recursive: true, force: true });
  });

  test('a run waiting at an approval on build A finishes on A after build B, with an incompatible workflow change, is made current; new runs go to B', async () => {
    const deployment = `deploy-test-${Math.random().toString(36).slice(2, 8)}`;
    const env = { ...harness.env, AGENT_PIPELINE_DEPLOYMENT: deployment };
    const file = await harness.writePipeline('deploy-pinned', PIPELINE);
    // Build B's bundle (webpack, the slowest step on a loaded machine) is made while build A starts and its run waits.
    const bundlingB = bundleWorkflowCode({ workflowsPath: INCOMPATIBLE_WORKFLOWS, logger: new DefaultLogger('WARN') });
    bundlingB.catch(() => undefined);

    // Build A: the worker as users run it. The deployment has no current build, so A makes itself current.
    workerA = execa('node', [CLI, 'worker'], { env: { ...env, AGENT_PIPELINE_BUILD_ID: 'build-a' }, extendEnv: false, reject: false, stdin: 'ignore' });
    // Until A's first poll registers the deployment, there is none (`deploy status` exits 2).
    await eventually(() => deploymentStatus(harness.client, deployment), (status) => status?.currentBuildId === 'build-a', 90_000, 'build A becoming current');
    // Back to back in one process: what `deploy status` says, and the first run's start.
    const [statusA, started] = await runCliCommands([['deploy', 'status', '--json'], ['start', file, '--json']], env);
    expect(statusA.exitCode, statusA.all).toBe(0);
    expect(parseJson<DeploymentStatus>(statusA).currentBuildId).toBe('build-a');
    const first = parseJson<{ runId: string }>(started).runId;
    /** Waits on the run's state in this process (what `status` reads): polling the command started a Node process each time. */
    const waitsForApproval = async (runId: string, what: string): Promise<void> => {
      await eventually(async () => (await library!.getRun(runId).status()).state, (state) => state.stages.some((s) => s.waitingFor !== undefined), 90_000, what);
    };
    await waitsForApproval(first, 'run 1 waiting for approval');
    // Then `status --json` as a user reads it, of a run on build A's worker process, again if its status query timed out
    // on a loaded machine. (Run 2's wait, on build B, is read in this process only: a command costs a Node process.)
    await eventually(async () => parseJson<RunJson>(await runCli(['status', first, '--json'], env)).waiting.length, (n) => n === 1, 60_000, 'run 1 waiting for approval');

    // Build B: the same workflow type, but it starts with a timer, so it cannot replay what A recorded.
    const { code } = await bundlingB;
    const replayOnB = await Worker.runReplayHistory({ workflowBundle: { code } }, await harness.client.workflow.getHandle(first).fetchHistory()).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(replayOnB?.name).toBe('DeterminismViolationError');
    const bundleB = path.join(scratch, 'workflow-bundle-b.js');
    await writeFile(bundleB, code);
    workerB = await createPipelineWorker({
      env: { ...env, AGENT_PIPELINE_BUILD_ID: 'build-b' },
      taskQueue: harness.taskQueue,
      workflowBundlePath: bundleB,
    });
    workerBDone = workerB.run();
    // `deploy set-current` refuses a build no worker has polled yet: waited for here, then made current as a user does.
    await untilBuildPolled(harness.client, deployment, 'build-b');
    const promoted = await eventually(() => runCli(['deploy', 'set-current', 'build-b'], env), (r) => r.exitCode === 0, 60_000, 'build B made current');
    expect(promoted.stdout).toContain(`New runs of ${deployment} now go to build build-b (was build-a, which keeps its pinned runs until they finish).`);

    // Back to back in one process: run 1's approval, its watch, and the second run's start.
    const [approved, finished, started2] = await runCliCommands([['approve', first], ['watch', first, '--json'], ['start', file, '--json']], env, 240_000);
    expect(approved.exitCode, approved.all).toBe(0);
    expect(finished.exitCode, finished.all).toBe(0);
    expect(parseJson<RunJson>(finished).status).toBe('completed');
    const run1 = await workflowTaskBuilds(harness.client.workflow.getHandle(first));
    expect(run1.failedTasks).toEqual([]);
    expect(new Set(run1.builds)).toEqual(new Set(['build-a']));

    const second = parseJson<{ runId: string }>(started2).runId;
    await waitsForApproval(second, 'run 2 waiting for approval');
    const [approved2, finished2, status] = await runCliCommands([['approve', second], ['watch', second, '--json'], ['deploy', 'status', '--json']], env, 240_000);
    expect(approved2.exitCode, approved2.all).toBe(0);
    expect(parseJson<RunJson>(finished2).status).toBe('completed');
    const run2 = await workflowTaskBuilds(harness.client.workflow.getHandle(second));
    expect(run2.failedTasks).toEqual([]);
    expect(new Set(run2.builds)).toEqual(new Set(['build-b']));
    const pinned = (await harness.client.workflow.getHandle(second).describe()).raw.workflowExecutionInfo?.versioningInfo;
    expect(pinned?.deploymentVersion?.buildId).toBe('build-b');
    // The replay check every harness makes at close (replay-check.ts) catches such code: run 2 does not replay on A's.
    await expect(expectRunsReplay(harness.client, harness.taskQueue, { bundlePath: WORKFLOW_BUNDLE })).rejects.toThrow(
      new RegExp(`do not replay on their workflow code:\\n${second} \\(.*Nondeterminism`),
    );

    expect(parseJson<DeploymentStatus>(status).currentBuildId).toBe('build-b');
    expect(parseJson<DeploymentStatus>(status).versions.find((v) => v.buildId === 'build-a')?.status).toMatch(/^(draining|drained)$/);
  }, 400_000);

  test('set-current of a build no worker has polled names the known builds and exits 2', async () => {
    const env = { ...harness.env, AGENT_PIPELINE_DEPLOYMENT: `deploy-none-${Math.random().toString(36).slice(2, 8)}` };
    const status = await runCli(['deploy', 'status'], env);
    expect(status.exitCode).toBe(2);
    expect(status.stderr).toContain(`[DEPLOYMENT_NOT_FOUND] no Worker Deployment "${env.AGENT_PIPELINE_DEPLOYMENT}"`);
    const result = await runCli(['deploy', 'set-current', 'nope'], env);
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain('[BUILD_NOT_FOUND] no worker of build "nope" has polled deployment');
  });
});
