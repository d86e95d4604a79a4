import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { DeploymentStatus } from '../../src/worker/deployment-control.js';
import { RunHandle } from '../../src/library/run-handle.js';
import { createPipelineWorker } from '../../src/worker/create-worker.js';
import { createHarness, WORKFLOW_BUNDLE, type Harness } from '../helpers/harness.js';
import { stopTestWorker } from '../helpers/teardown.js';
import { eventually, parseJson, runCli, runCliCommands } from './cli-helpers.js';
import { untilBuildPolled } from './deploy-helpers.js';
import { waitForWaiting } from './workflow-helpers.js';

/*
 * With Worker Deployment Versioning, a run is pinned to the build it started on. A run that continues as new must stay
 * there too: its next executions are the same run, and a new build may not be able to read the state it carries.
 */

const STAGES = 16;
const PIPELINE =
  'name: deploy-continued\ncontinueAsNew: { afterEvents: 100 }\n' +
  'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500, heartbeatTimeout: 10s }\nstages:\n' +
  '  - id: gate\n    approval: { message: Go on? }\n' +
  Array.from({ length: STAGES }, (_, i) => `  - id: s${i + 1}\n    prompt: Do s${i + 1} DEPLOY-CONTINUED.\n    needs: [${i === 0 ? 'gate' : `s${i}`}]\n`).join('');

const SCENARIO = {
  rules: [{ name: 'stage', match: 'DEPLOY-CONTINUED', repeatLastTurn: true, turns: [{ text: '```json\n{"success": true, "summary": "Done.", "outputs": {}}\n```' }] }],
};

describe('a pinned run that continues as new', () => {
  let harness: Harness;
  const workers: { worker: Worker; done: Promise<void> }[] = [];

  beforeAll(async () => {
    harness = await createHarness('deploy-can', { scenario: SCENARIO, worker: false });
  });
  afterAll(async () => {
    await Promise.all(workers.map(({ worker, done }, i) => stopTestWorker(`a worker of build ${i + 1}`, worker, done)));
    await harness?.close();
  });

  async function startWorker(env: NodeJS.ProcessEnv, buildId: string): Promise<void> {
    const worker = await createPipelineWorker({
      env: { ...env, AGENT_PIPELINE_BUILD_ID: buildId },
      taskQueue: harness.taskQueue,
      workflowBundlePath: WORKFLOW_BUNDLE,
    });
    workers.push({ worker, done: worker.run() });
  }

  test('keeps its build after another build became current: every execution runs on the build it started on', async () => {
    const env = { ...harness.env, AGENT_PIPELINE_DEPLOYMENT: `deploy-can-${Math.random().toString(36).slice(2, 8)}` };
    await startWorker(env, 'build-a');
    await untilBuildPolled(harness.client, env.AGENT_PIPELINE_DEPLOYMENT, 'build-a');
    // An in-process worker does not adopt itself as the first build (the `worker` command does): make A current.
    await eventually(() => runCli(['deploy', 'set-current', 'build-a'], env), (r) => r.exitCode === 0, 60_000, 'build A registered and made current');
    const handle = await harness.startYaml('deploy-continued', PIPELINE);
    await waitForWaiting(handle, 'gate', 'approval');

    // Build B (the same code) becomes current while the run waits; the run stays on A through every hand-over.
    await startWorker(env, 'build-b');
    await untilBuildPolled(harness.client, env.AGENT_PIPELINE_DEPLOYMENT, 'build-b');
    // Back to back in one process (a command costs a Node process); set-current of A above ran as a user runs it.
    const [promoted, status] = await eventually(
      () => runCliCommands([['deploy', 'set-current', 'build-b'], ['deploy', 'status', '--json']], env),
      ([r]) => r.exitCode === 0,
      60_000,
      'build B made current',
    );
    expect(promoted.exitCode, promoted.all).toBe(0);
    expect(parseJson<DeploymentStatus>(status).currentBuildId).toBe('build-b');
    const run = new RunHandle(harness.client, handle.workflowId);
    await run.approve({ stage: 'gate' });
    const final = await run.result();
    expect(final.stages.map((s) => s.status)).toEqual(Array(STAGES + 1).fill('completed'));

    const executions = [];
    for await (const info of harness.client.workflow.list({ query: `WorkflowId = '${handle.workflowId}'` })) executions.push(info);
    expect(executions.length).toBeGreaterThanOrEqual(2);
    for (const info of executions) {
      const execution = harness.client.workflow.getHandle(handle.workflowId, info.runId);
      const builds = ((await execution.fetchHistory()).events ?? []).flatMap((e) =>
        e.workflowTaskCompletedEventAttributes ? [e.workflowTaskCompletedEventAttributes.deploymentVersion?.buildId ?? '(unversioned)'] : [],
      );
      expect(new Set(builds), `execution ${info.runId} (${info.status.name})`).toEqual(new Set(['build-a']));
      expect((await execution.describe()).raw.workflowExecutionInfo?.versioningInfo?.deploymentVersion?.buildId).toBe('build-a');
    }

    // The control: by then a new run goes to build B, so staying on A was the pin, not a slow routing change.
    const second = await harness.startYaml('deploy-continued', PIPELINE);
    await waitForWaiting(second, 'gate', 'approval');
    const pinned = (await second.describe()).raw.workflowExecutionInfo?.versioningInfo;
    expect(pinned?.deploymentVersion?.buildId).toBe('build-b');
    await new RunHandle(harness.client, second.workflowId).reject('not needed', { stage: 'gate' });
  }, 400_000);
});
