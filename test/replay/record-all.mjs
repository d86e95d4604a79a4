#!/usr/bin/env node
// Re-records every history the replay tests keep, after a deliberate change to the workflow's commands:
//   npm run build && node test/replay/record-all.mjs
// Names as arguments record only those (a new fixture, without touching the others): `… record-all.mjs flows`.
// Starts its own in-memory dev server, the scripted model server (fixtures/scenario.yaml) and a worker on the
// built code (dist/), runs each fixture pipeline (answering, approving or cancelling where it needs a person),
// and writes histories/<name>.json.
import { Client, Connection } from '@temporalio/client';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { loadPipelineFile, resolveInputs } from '../../dist/library/load-pipeline.js';
import { startRun } from '../../dist/library/runs.js';
import { createRunBundle } from '../../dist/bundle/create-run-bundle.js';
import { startDevServer } from '../../dist/dev/dev-server.js';
import { startModelServer } from '../../dist/dev/model-server.js';
import { createPipelineWorker } from '../../dist/worker/create-worker.js';
import { answerStageUpdate, approveStageUpdate, getStatusQuery } from '../../dist/contracts/messages.js';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { WORKFLOW_CODE_VERSION } from '../../dist/workflows/code-version.js';
import { recordHistory } from './record-history.mjs';
import { generateSigningKey, parseSigningKey } from '../../dist/trust/keys.js';
import { RunSigner } from '../../dist/trust/signer.js';

// The worker trusts this key to start runs and decide, so runs are signed and their decisions too (`*-signed`
// cases); the other cases are started unsigned, which such a worker refuses, so they are recorded by a second
// worker without keys on its own task queue.
const KEY = generateSigningKey('replay');
const signer = new RunSigner(parseSigningKey(KEY.privateLine));
const SIGNED_TASK_QUEUE = 'replay-record-signed';
import { MANIFEST, writeManifest } from './write-manifest.mjs';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
const TASK_QUEUE = 'replay-record';

/** Polls until `stage` waits for a person. */
async function waitForWaiting(handle, stage) {
  for (let i = 0; i < 240; i++) {
    const state = await handle.query(getStatusQuery);
    if (state.stages.find((s) => s.id === stage)?.waitingFor) return;
    await sleep(250);
  }
  throw new Error(`stage ${stage} of ${handle.workflowId} never waited`);
}

/** Each recorded run: its fixture, and what a person does while it runs. */
const CASES = {
  linear: async () => {},
  parallel: async () => {},
  rework: async () => {},
  question: async (handle) => {
    await waitForWaiting(handle, 'ask');
    await handle.executeUpdate(answerStageUpdate, { args: [{ stage: 'ask', text: 'Casual.' }] });
    await waitForWaiting(handle, 'first');
    await handle.executeUpdate(approveStageUpdate, { args: [{ stage: 'first' }] });
  },
  flows: async () => {},
  // Recorded after signed runs and decisions (patch sign23-signed-runs): the run-trust check, and each decision
  // checked by a local activity in its update handler before it takes effect.
  'question-signed': async (handle) => {
    await waitForWaiting(handle, 'ask');
    await handle.executeUpdate(answerStageUpdate, { args: [signer.signDecision(handle.workflowId, answerStageUpdate.name, { stage: 'ask', text: 'Casual.' })] });
    await waitForWaiting(handle, 'first');
    await handle.executeUpdate(approveStageUpdate, { args: [signer.signDecision(handle.workflowId, approveStageUpdate.name, { stage: 'first' })] });
  },
  // Recorded after the input check became a local activity (patch input-check-local-activity); the histories above
  // stay as they were, so that runs started before it keep replaying.
  'linear-input-check': async () => {},
  // A run that continues as new (a low continueAsNew.afterEvents): both sides of a hand-over are recorded (CHAINS).
  continued: async () => {},
  // Recorded after template values went by reference (patch template-values-by-reference): stages are sent only the
  // results of the stages they need, and read the rest with a query.
  'flows-template-values': async () => {},
  // Recorded after forks existed: the fork's first activity, then the stages it did not take over (FORKS).
  forked: async () => {},
  cancelled: async (handle) => {
    for (let i = 0; i < 240; i++) {
      const state = await handle.query(getStatusQuery);
      if (state.stages.find((s) => s.id === 'slow')?.status === 'running') break;
      await sleep(250);
    }
    await sleep(1_500);
    await handle.cancel();
  },
};

/**
 * Cases whose run is a fork (docs/forking.md): a run of the same fixture, carrying its files, is run first, and the
 * recorded run forks it from this stage (its first step, `prepareFork`, takes the earlier stages over).
 */
const FORKS = { forked: 'second' };

/** Cases whose run continues as new: the histories of its first and its last execution, under these names. */
const CHAINS = { continued: ['continued-first', 'continued-last'] };

/** The run ids of every execution of a run, oldest first, read back from the latest through `continuedExecutionRunId`. */
async function executionRunIds(client, workflowId) {
  const ids = [];
  let runId = (await client.workflow.getHandle(workflowId).describe()).runId;
  while (runId) {
    ids.unshift(runId);
    const page = await client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId, runId }, maximumPageSize: 1 });
    runId = page.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return ids;
}

/** Cases that record a fixture of another name. */
const FIXTURE_OF = { 'linear-input-check': 'linear', 'flows-template-values': 'flows', 'question-signed': 'question', forked: 'linear' };

// Histories are re-recorded either for a new workflow code version, or because they still replay (new fixtures, say).
// Recording over histories that no longer replay, under the same version, would hide a change that breaks runs in flight.
const recorded = existsSync(MANIFEST) ? JSON.parse(readFileSync(MANIFEST, 'utf8')) : undefined;
if (recorded?.workflowCodeVersion === WORKFLOW_CODE_VERSION && !process.argv.includes('--initial')) {
  try {
    execFileSync('npx', ['vitest', 'run', 'test/replay/replay.test.ts'], { stdio: 'inherit', cwd: fileURLToPath(new URL('../../', import.meta.url)) });
  } catch {
    console.error(
      `The recorded histories no longer replay on this code, and WORKFLOW_CODE_VERSION is still ${WORKFLOW_CODE_VERSION}: this change would break runs in flight.\n` +
        'Keep them replaying with patched() (see docs/development.md#changing-the-workflow-safely), or bump WORKFLOW_CODE_VERSION in src/workflows/code-version.ts (a new build id, so old runs stay pinned to old workers) and record again.',
    );
    process.exit(1);
  }
}

const scratch = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-record-'));
const server = await startDevServer({ port: 'auto', headless: true, dbFile: null, logFile: path.join(scratch, 'server.log') });
const model = await startModelServer({ scenario: path.join(FIXTURES, 'scenario.yaml'), log: () => {} });
const env = {
  ...process.env,
  TEMPORAL_ADDRESS: server.address,
  AGENT_PIPELINE_TASK_QUEUE: TASK_QUEUE,
  AGENT_PIPELINE_WORKSPACES: path.join(scratch, 'workspaces'),
  ANTHROPIC_BASE_URL: model.url,
  ANTHROPIC_API_KEY: 'sk-replay-record',
  // As the histories were recorded: sandboxed where the host can, without failing where it cannot.
  AGENT_PIPELINE_SANDBOX: 'auto',
};
const worker = await createPipelineWorker({ env, taskQueue: TASK_QUEUE });
const signedWorker = await createPipelineWorker({ env: { ...env, AGENT_PIPELINE_TRUSTED_KEYS: KEY.publicLine, AGENT_PIPELINE_ALLOW_WORKER_FILES: '1' }, taskQueue: SIGNED_TASK_QUEUE });
const running = Promise.all([worker.run(), signedWorker.run()]);
const connection = await Connection.connect({ address: server.address });
try {
  const client = new Client({ connection });
  const only = process.argv.slice(2);
  for (const [name, act] of Object.entries(CASES).filter(([n]) => only.length === 0 || only.includes(n))) {
    const file = path.join(FIXTURES, `${FIXTURE_OF[name] ?? name}.yaml`);
    const { pipeline, baseDir } = await loadPipelineFile(file);
    const input = { pipeline, baseDir, pipelineFile: `test/replay/fixtures/${FIXTURE_OF[name] ?? name}.yaml`, inputs: resolveInputs(pipeline, file, {}) };
    const signed = name.endsWith('-signed');
    if (FORKS[name]) {
      input.bundle = await createRunBundle(file, pipeline);
      const { handle: source } = await startRun(client, input, { taskQueue: TASK_QUEUE, id: `replay-${name}-source` });
      await source.result();
      input.fork = { runId: source.workflowId, stage: FORKS[name] };
    }
    const { handle } = await startRun(client, input, { taskQueue: signed ? SIGNED_TASK_QUEUE : TASK_QUEUE, id: `replay-${name}`, signer: signed ? signer : undefined });
    await act(handle);
    await handle.result().catch(() => undefined);
    const status = (await handle.query(getStatusQuery)).status;
    if (CHAINS[name]) {
      const runIds = await executionRunIds(client, handle.workflowId);
      if (runIds.length < 2) throw new Error(`${name}: the run never continued as new`);
      const [first, last] = CHAINS[name];
      console.log(`${name}: ${status} in ${runIds.length} executions; wrote ${await recordHistory(server, handle.workflowId, first, runIds[0])}`);
      console.log(`${name}: wrote ${await recordHistory(server, handle.workflowId, last, runIds.at(-1))}`);
      continue;
    }
    console.log(`${name}: ${status}; wrote ${await recordHistory(server, handle.workflowId, name)}`);
  }
  console.log(`wrote ${writeManifest()}`);
} finally {
  await connection.close();
  worker.shutdown();
  signedWorker.shutdown();
  await running;
  await model.close();
  await server.stop();
  await rm(scratch, { recursive: true, force: true });
}
