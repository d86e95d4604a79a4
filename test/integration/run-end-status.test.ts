import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PipelineClient, RunFailedError, type RunEvent } from '../../src/library/index.js';
import { PIPELINE_WORKFLOW_TYPE } from '../../src/contracts/messages.js';
import { PIPELINE_NAME_ATTRIBUTE } from '../../src/contracts/search-attributes.js';
import { reconcileClosedRun } from '../../src/library/run-end.js';
import { rebuildRunState } from '../../src/library/run-history.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { parseJson, runCli, runCliCommands } from './cli-helpers.js';
import { waitForWaiting } from './workflow-helpers.js';

/*
 * Issue 34 item 2 (and issue 33 item 14's last side bug): a run that Temporal closed without the workflow finishing
 * its own state read as `running`. After terminate(), status() and CLI `status` said running (the CLI's timer kept
 * ticking) while list() and result() said terminated and events() ended `run_ended status=failed`; a run refused by
 * its input check showed `running` too. Every reader must say how the run ended: the status query of a closed run
 * replays a workflow that never finished, so the readers reconcile it with the execution's status.
 */

const GATED = 'name: end-status\ndefaults: { backend: anthropic-api, model: haiku, retries: 0 }\nstages:\n  - id: gate\n    approval: true\n  - id: after\n    prompt: After.\n    needs: [gate]\n';

/**
 * Every reader's word on the run: the library's status, result, events and list, and the CLI's status, list and watch.
 * The CLI's commands run side by side as a user runs them, each a process of its own; with `oneProcess`, back to back
 * in one process through the CLI's entry, each with its own argv, output and exit code (a process costs half a CPU
 * second, and the first test runs each command as a user does).
 */
// Lists by pipeline name: the namespace is shared with other test files' encrypted runs, which a client without their
// key cannot list (it is told to set the key).
async function readers(client: PipelineClient, harness: Harness, id: string, { pipeline = 'end-status', oneProcess = false } = {}) {
  const run = client.getRun(id);
  const events = async (): Promise<RunEvent[]> => {
    const seen: RunEvent[] = [];
    for await (const event of run.events({ progress: false })) seen.push(event);
    return seen;
  };
  const commands = [['status', id, '--json'], ['status', id], ['list', '--json', '--pipeline', pipeline, '--limit', '50'], ['watch', id, '--json']];
  const cli = oneProcess ? runCliCommands(commands, harness.env) : Promise.all(commands.map((args) => runCli(args, harness.env)));
  const [status, result, seenEvents, list, [cliStatus, cliText, cliList, watch]] = await Promise.all([
    run.status(),
    run.result().then(() => undefined, (e: unknown) => e),
    events(),
    client.list({ pipeline, limit: 50 }),
    cli,
  ]);
  return {
    status,
    result,
    events: seenEvents,
    listed: list.find((r) => r.runId === id),
    cliStatus: parseJson<RunState & { executionStatus: string }>(cliStatus),
    cliText,
    cliList: parseJson<{ runs: { runId: string; status: string }[] }>(cliList).runs.find((r) => r.runId === id),
    watch,
  };
}

describe('how a run ended, as every reader says it', () => {
  let harness: Harness;
  let client: PipelineClient;
  let file: string;

  beforeAll(async () => {
    harness = await createHarness('end-status', { scenario: { rules: [] } });
    client = await PipelineClient.connect({ env: harness.env });
    file = await harness.writePipeline('end-status', GATED);
  });
  afterAll(async () => {
    await client?.close();
    await harness?.close();
  });

  test('a terminated run reads as terminated everywhere: status, result, events, list and the CLI, its clock stopped', async () => {
    const run = await client.start(file);
    await waitForWaiting(harness.client.workflow.getHandle(run.id), 'gate', 'approval');
    await harness.client.workflow.getHandle(run.id).terminate('stopped by the operator');

    const seen = await readers(client, harness, run.id);
    expect(seen.status.executionStatus).toBe('TERMINATED');
    expect(seen.status.state).toMatchObject({ status: 'terminated', error: { type: 'TERMINATED', message: expect.stringContaining('stopped by the operator') } });
    expect(seen.status.state.finishedAt).toBeGreaterThan(seen.status.state.startedAt);
    // Nothing waits or runs in a closed run: the gate's wait is over and no clock keeps ticking.
    expect(seen.status.state.stages.map((s) => [s.id, s.status])).toEqual([['gate', 'cancelled'], ['after', 'skipped']]);
    expect(seen.status.state.stages[0]).not.toHaveProperty('waitingFor');
    expect(seen.result).toBeInstanceOf(RunFailedError);
    expect(seen.result).toMatchObject({ type: 'terminated', state: { status: 'terminated' } });
    expect(seen.events.at(-1)).toMatchObject({ type: 'run_ended', status: 'terminated' });
    expect(seen.listed?.status).toBe('terminated');
    expect(seen.cliStatus).toMatchObject({ status: 'terminated', executionStatus: 'TERMINATED', finishedAt: seen.status.state.finishedAt });
    expect(seen.cliText.stdout).toContain(`· terminated ·`);
    expect(seen.cliText.stdout).not.toContain('waits for approval');
    expect(seen.cliList?.status).toBe('terminated');
    expect(seen.watch.exitCode).toBe(1);
    expect(parseJson<RunState>(seen.watch).status).toBe('terminated');
  });

  test('a run refused by its input check reads as failed with the check\'s problem, not running', async () => {
    const id = `end-status-invalid-${Math.random().toString(36).slice(2, 8)}`;
    const input = { version: 1, pipeline: { name: 'invalid', stages: [{ id: 'a', prompt: 'do a', colour: 'blue' }] }, baseDir: '/tmp', pipelineFile: 'p.yaml', inputs: {} };
    // Named as our client names its runs (a search attribute), so `list --pipeline` finds it.
    await harness.client.workflow.start(PIPELINE_WORKFLOW_TYPE, { workflowId: id, taskQueue: harness.taskQueue, args: [input], typedSearchAttributes: [{ key: PIPELINE_NAME_ATTRIBUTE, value: 'invalid' }] });
    await harness.client.workflow.getHandle(id).result().catch(() => undefined);

    const seen = await readers(client, harness, id, { pipeline: 'invalid', oneProcess: true });
    expect(seen.status.executionStatus).toBe('FAILED');
    expect(seen.status.state).toMatchObject({ status: 'failed', error: { type: 'PIPELINE_INVALID', message: expect.stringContaining('unknown field "colour"') } });
    expect(seen.status.state.stages.map((s) => s.status)).toEqual(['skipped']);
    // The same from its history, as a reader does when no worker answers the status query in time (a loaded machine):
    // the rebuilt state says `failed`, and the execution's failure says why.
    const handle = harness.client.workflow.getHandle(id);
    const description = await handle.describe();
    const rebuilt = rebuildRunState(await handle.fetchHistory(), description);
    const fromHistory = await reconcileClosedRun(handle, rebuilt, { status: description.status.name, closeTime: description.closeTime?.getTime() });
    expect(fromHistory).toMatchObject({ status: 'failed', error: { type: 'PIPELINE_INVALID', message: expect.stringContaining('unknown field "colour"') } });
    expect(seen.result).toMatchObject({ type: 'failed', state: { status: 'failed' } });
    expect(seen.events.at(-1)).toMatchObject({ type: 'run_ended', status: 'failed' });
    expect(seen.listed?.status).toBe('failed');
    expect(seen.cliStatus).toMatchObject({ status: 'failed', error: { type: 'PIPELINE_INVALID' } });
    expect(seen.cliText.stdout).toContain('· failed ·');
    expect(seen.cliText.stdout).toContain('[PIPELINE_INVALID]');
    expect(seen.cliList?.status).toBe('failed');
  });

  test('a run Temporal timed out (its execution timeout) reads as timed_out everywhere', async () => {
    const id = `end-status-timeout-${Math.random().toString(36).slice(2, 8)}`;
    const prepared = await client.prepare(file);
    await harness.client.workflow.start(PIPELINE_WORKFLOW_TYPE, { workflowId: id, taskQueue: harness.taskQueue, args: [{ version: 1, ...prepared }], workflowExecutionTimeout: '2s', typedSearchAttributes: [{ key: PIPELINE_NAME_ATTRIBUTE, value: 'end-status' }] });
    await harness.client.workflow.getHandle(id).result().catch(() => undefined);

    const seen = await readers(client, harness, id, { oneProcess: true });
    expect(seen.status.executionStatus).toBe('TIMED_OUT');
    expect(seen.status.state).toMatchObject({ status: 'timed_out', error: { type: 'TIMED_OUT' } });
    expect(seen.result).toMatchObject({ type: 'timed_out', state: { status: 'timed_out' } });
    expect(seen.events.at(-1)).toMatchObject({ type: 'run_ended', status: 'timed_out' });
    expect(seen.listed?.status).toBe('timed_out');
    expect(seen.cliStatus).toMatchObject({ status: 'timed_out' });
    expect(seen.cliList?.status).toBe('timed_out');
  });
});
