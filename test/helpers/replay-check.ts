import type { Client, Connection } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { boundedStep, closeTestConnection } from './teardown.js';

/** How long one step of the check (the listing, one history fetched and replayed, a connection) may take. @unit milliseconds */
const REPLAY_STEP_BOUND_MS = 90_000;

/**
 * Replays the history of every execution on `taskQueue` (each run, each execution a run continued as new into) on
 * the workflow bundle its worker loaded, and fails if the code does not replay it (a nondeterminism, or a workflow task
 * that fails on replay).
 *
 * Why: the test workers keep runs in their cache, so a run's code goes from one event to the next in memory and
 * would not notice code whose commands depend on something besides its history. Replaying each whole history at the
 * end catches that for every run a test made, once, where a cache-less worker replayed the growing history at every
 * workflow task and query (issue 32: work growing with the square of the history's length).
 */
export async function expectRunsReplay(client: Client, taskQueue: string, replay: { bundlePath: string; dataConverter?: DataConverter }): Promise<void> {
  const name = `the replay check of ${taskQueue}`;
  const executions = await boundedStep(`${name}: listing its runs`, executionsOn(client, taskQueue), REPLAY_STEP_BOUND_MS);
  if (executions.length === 0) return;
  async function* histories() {
    for (const { workflowId, runId } of executions) yield { workflowId, history: await client.workflow.getHandle(workflowId, runId).fetchHistory() };
  }
  const failures: string[] = [];
  const options = { workflowBundle: { codePath: replay.bundlePath }, dataConverter: replay.dataConverter };
  // The SDK's runtime shuts down once nothing native is left, and a replay worker being made just then (another test's
  // last worker stopping) finds it gone: a connection of its own keeps it up until the replay is over.
  const address = (client.connection as Connection).options.address;
  const keepAlive = await boundedStep(`${name}: connecting to ${address}`, NativeConnection.connect({ address }), REPLAY_STEP_BOUND_MS);
  try {
    // Each history (fetched, then replayed) has a bound of its own: a run's whole replay may be long, one step is not.
    const results = Worker.runReplayHistories(options, histories())[Symbol.asyncIterator]();
    for (let index = 0; ; index++) {
      const run = executions.at(index);
      const step = run ? `history ${index + 1} of ${executions.length} (${run.workflowId}, run ${run.runId})` : 'the replay Worker stopping';
      const next = await boundedStep(`${name}: ${step}`, results.next(), REPLAY_STEP_BOUND_MS);
      if (next.done) break;
      if (next.value.error) failures.push(`${next.value.workflowId} (${next.value.runId}): ${next.value.error.message}`);
    }
  } finally {
    await closeTestConnection(name, keepAlive);
  }
  if (failures.length > 0) throw new Error(`runs on ${taskQueue} do not replay on their workflow code:\n${failures.join('\n')}`);
}

/** The executions on `taskQueue`, listed raw: a run's memo may be encrypted with a key the listing client lacks. */
async function executionsOn(client: Client, taskQueue: string): Promise<{ workflowId: string; runId: string }[]> {
  const executions: { workflowId: string; runId: string }[] = [];
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await client.workflowService.listWorkflowExecutions({ namespace: client.options.namespace, query: `TaskQueue = "${taskQueue}"`, nextPageToken });
    for (const e of page.executions ?? []) executions.push({ workflowId: e.execution!.workflowId!, runId: e.execution!.runId! });
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
  return executions;
}
