#!/usr/bin/env node
// Records the histories of a lease workflow and an API-key limiter workflow as workers before issue 33 left them, for
// the replay tests: check out the code before it (`git checkout <commit> -- src && npm run build`), then
//   node test/replay/record-trust-histories.mjs
// Both run encrypted (fixtures/trust-encryption-key.txt, a key for these fixtures only) and meet what issue 33 changed:
// a lease without ttl naming no run (a lent folder's lease of that release), one naming a run that is gone (taken
// back by the reclaim's activity), a namespace client's plain release of a real holder and plain pause signal (both
// applied then). Each workflow is made to continue as new, and its first execution is recorded.
import { Client, Connection, WithStartWorkflowOperation } from '@temporalio/client';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { clientDataConverter, payloadCodecsFor } from '../../dist/codec/data-converter.js';
import { acquireLeaseUpdate, describeLeaseQuery, releaseLeaseUpdate, renewLeaseUpdate } from '../../dist/contracts/lease-messages.js';
import { pauseKeySignal, reserveRequestUpdate } from '../../dist/contracts/api-key-limit-messages.js';
import { startDevServer } from '../../dist/dev/dev-server.js';
import { createPipelineWorker } from '../../dist/worker/create-worker.js';
import { recordHistory } from './record-history.mjs';

const KEY = (await readFile(fileURLToPath(new URL('./fixtures/trust-encryption-key.txt', import.meta.url)), 'utf8')).trim();
const TASK_QUEUE = 'replay-record-trust';
export const LEASE_ID = 'replay-lease-before-trust';
export const API_KEY_ID = 'replay-api-key-before-trust';

async function until(what, probe) {
  for (let i = 0; i < 480; i++) {
    if (await probe()) return;
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The run id of the workflow's first execution, read back through `continuedExecutionRunId`. */
async function firstExecution(client, workflowId) {
  let runId = (await client.workflow.getHandle(workflowId).describe()).runId;
  for (;;) {
    const first = await client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId, runId }, maximumPageSize: 1 });
    const earlier = first.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
    if (!earlier) return runId;
    runId = earlier;
  }
}

/** A namespace client cannot read the (encrypted) outcome of what it sends; what matters is that it was sent. */
const ignoringOutcome = (sent) => sent.catch(() => undefined);

async function recordLease(holder, stranger, server) {
  const handle = holder.workflow.getHandle(LEASE_ID);
  const start = new WithStartWorkflowOperation('leaseWorkflow', { workflowId: LEASE_ID, taskQueue: TASK_QUEUE, args: [{ key: 'replay:lease', handOverAfterEvents: 60 }], workflowIdConflictPolicy: 'USE_EXISTING' });
  // A lent folder's lease as that release took it: no ttl, no run.
  await holder.workflow.executeUpdateWithStart(acquireLeaseUpdate, { args: [{ holder: 'run:replay-folder-run', limit: 1 }], startWorkflowOperation: start });
  await handle.executeUpdate(acquireLeaseUpdate, { args: [{ holder: 'waiter', limit: 1, ttlMs: 60_000 }] });
  // A namespace client gives the folder's lease back, and the waiter gets it.
  await ignoringOutcome(stranger.workflow.getHandle(LEASE_ID).executeUpdate(releaseLeaseUpdate, { args: [{ holder: 'run:replay-folder-run' }] }));
  await until('the stranger\'s release', async () => (await handle.query(describeLeaseQuery)).holders.some((h) => h.holder === 'waiter'));
  // A run's lease, naming a run that does not exist: queued behind the waiter, then granted.
  await handle.executeUpdate(acquireLeaseUpdate, { args: [{ holder: 'run-holder', limit: 1, run: 'replay-gone-run' }] });
  await handle.executeUpdate(releaseLeaseUpdate, { args: [{ holder: 'waiter' }] });
  // Somebody waits: within 15 s the reclaim finds the run closed and takes the key back.
  await handle.executeUpdate(acquireLeaseUpdate, { args: [{ holder: 'late', limit: 1, ttlMs: 60_000 }] });
  await until('the reclaim', async () => (await handle.query(describeLeaseQuery)).holders.some((h) => h.holder === 'late'));
  for (let i = 0; i < 40 && (await firstExecution(holder, LEASE_ID)) === (await handle.describe()).runId; i++) {
    await handle.executeUpdate(renewLeaseUpdate, { args: [{ holder: 'late' }] });
  }
  const runId = await firstExecution(holder, LEASE_ID);
  if (runId === (await handle.describe()).runId) throw new Error('the lease workflow never continued as new');
  await handle.executeUpdate(releaseLeaseUpdate, { args: [{ holder: 'late' }] });
  console.log(`wrote ${await recordHistory(server, LEASE_ID, 'lease-before-trust', runId)}`);
}

async function recordApiKey(holder, stranger, server) {
  const handle = holder.workflow.getHandle(API_KEY_ID);
  const args = [{ keyId: 'replay', continueAsNewAfterEvents: 30 }];
  await holder.workflow.signalWithStart('apiKeyLimitWorkflow', { workflowId: API_KEY_ID, taskQueue: TASK_QUEUE, args, signal: pauseKeySignal, signalArgs: [{ until: Date.now() + 20_000 }] });
  // A namespace client's plain pause, which that release applied.
  await stranger.workflow.getHandle(API_KEY_ID).signal(pauseKeySignal, { until: Date.now() + 40_000 });
  for (let i = 0; i < 40 && (await firstExecution(holder, API_KEY_ID)) === (await handle.describe()).runId; i++) {
    await holder.workflow.executeUpdateWithStart(reserveRequestUpdate, {
      args: [{ perMinute: 100 }],
      startWorkflowOperation: new WithStartWorkflowOperation('apiKeyLimitWorkflow', { workflowId: API_KEY_ID, taskQueue: TASK_QUEUE, args, workflowIdConflictPolicy: 'USE_EXISTING' }),
    });
  }
  const runId = await firstExecution(holder, API_KEY_ID);
  if (runId === (await handle.describe()).runId) throw new Error('the limiter workflow never continued as new');
  console.log(`wrote ${await recordHistory(server, API_KEY_ID, 'api-key-before-trust', runId)}`);
}

const scratch = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-record-trust-'));
const server = await startDevServer({ port: 'auto', headless: true, dbFile: null, logFile: path.join(scratch, 'server.log') });
const env = { ...process.env, TEMPORAL_ADDRESS: server.address, AGENT_PIPELINE_WORKSPACES: path.join(scratch, 'workspaces'), AGENT_PIPELINE_ENCRYPTION_KEY: KEY, ANTHROPIC_API_KEY: '' };
const bundle = fileURLToPath(new URL('../../dist/workflow-bundle-encrypted.js', import.meta.url));
const worker = await createPipelineWorker({ env, taskQueue: TASK_QUEUE, workflowBundlePath: bundle });
const running = worker.run();
const connection = await Connection.connect({ address: server.address });
try {
  const holder = new Client({ connection, dataConverter: clientDataConverter(payloadCodecsFor(KEY)) });
  const stranger = new Client({ connection });
  await recordLease(holder, stranger, server);
  await recordApiKey(holder, stranger, server);
} finally {
  await connection.close();
  worker.shutdown();
  await running;
  await server.stop();
  await rm(scratch, { recursive: true, force: true });
}
