import { defaultPayloadConverter } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { LeaseClient } from '../../src/activities/leases/lease-client.js';
import { RunHandle } from '../../src/library/run-handle.js';
import type { PipelineRunInput } from '../../src/contracts/messages.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { stageOf, waitForState, waitForWaiting } from './workflow-helpers.js';

/*
 * Pipeline-level keys are held for the run's life (through waits for people, across continue-as-new) and given back
 * however it ends; a stage's key is held only while an attempt runs, never while the stage waits for a person. The
 * anthropic-api backend against the scripted model keeps it fast.
 */

const report = (summary: string): string => `Done.\n\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;

let harness: Harness;
/** Reads any key's book (by its workflow id, whichever worker started it). */
let leases: LeaseClient;

beforeAll(async () => {
  harness = await createHarness('limits-life', {
    scenario: { rules: [{ match: 'Pipeline: ', turns: [{ text: report('done') }], repeatLastTurn: true }] },
    // A waiting run reports its place (and learns of a cancel) within a second rather than 10 s.
    leasePollMs: 1_000,
  });
  leases = new LeaseClient(harness.client, harness.taskQueue);
});
afterAll(async () => {
  await harness?.close();
});

const header = (name: string, extra = ''): string =>
  `name: ${name}\ninputs: { tenant: { description: t } }\nlimits: [{ key: "tenant:{{inputs.tenant}}", concurrency: 1 }]\n${extra}` +
  'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500, heartbeatTimeout: 10s }\nstages:\n';

async function holders(key: string): Promise<string[]> {
  return ((await leases.describe(key))?.holders ?? []).map((h) => h.label ?? h.holder);
}
async function waiters(key: string): Promise<string[]> {
  return ((await leases.describe(key))?.waiters ?? []).map((h) => h.label ?? h.holder);
}

// Each test has its own tenant (so its own keys), runs and pipeline files: they run at once, overlapping their
// waits (for people, for hand-overs, for the key's workflow to check on a terminated holder).
describe.concurrent('pipeline-level keys', () => {
  test('are held for the run\'s life, through a wait for a person; the next run waits (and says so), a cancelled one leaves the queue', { timeout: 300_000 }, async () => {
    const tenant = `t-${Math.random().toString(36).slice(2, 8)}`;
    const key = `tenant:${tenant}`;
    const stageKey = `gate:${tenant}`;
    const file = await harness.writePipeline(
      'run-life',
      header('run-life') + `  - id: gate\n    prompt: Do the work.\n    approval: true\n    limits: [{ key: "gate:{{inputs.tenant}}", concurrency: 1 }]\n`,
    );
    const first = await harness.start(file, { tenant }, `life-first-${tenant}`);
    await waitForWaiting(first, 'gate', 'approval');
    // Waiting for a person: the run's key is held, the stage's key is not.
    expect(await holders(key)).toEqual([`run ${first.workflowId}`]);
    expect(await leases.describe(stageKey)).toBeUndefined();

    const second = await harness.start(file, { tenant }, `life-second-${tenant}`);
    const waiting = await waitForState(second, (s) => s.leaseWait !== undefined);
    expect(waiting.leaseWait).toMatchObject({ key, ahead: 0, holders: 1, limit: 1 });
    expect(stageOf(waiting, 'gate').status).toBe('pending');
    const third = await harness.start(file, { tenant }, `life-third-${tenant}`);
    expect((await waitForState(third, (s) => s.leaseWait?.ahead === 1)).leaseWait).toMatchObject({ key, ahead: 1 });
    await new RunHandle(harness.client, third.workflowId).cancel();
    await expect(third.result()).rejects.toThrow();
    expect(await waiters(key)).toEqual([`run ${second.workflowId}`]);

    await new RunHandle(harness.client, first.workflowId).approve({ stage: 'gate' });
    expect((await harness.finish(first)).status).toBe('completed');
    // The first run gave its key back at its end; the second holds it now and ran its stage.
    await waitForWaiting(second, 'gate', 'approval');
    expect(await holders(key)).toEqual([`run ${second.workflowId}`]);
    expect((await second.query('getStatus') as { leaseWait?: unknown }).leaseWait).toBeUndefined();
    await new RunHandle(harness.client, second.workflowId).reject('not this time', { stage: 'gate' });
    expect((await harness.finish(second)).status).toBe('failed');
    // Given back by a failed run too.
    expect(await leases.describe(key)).toBeUndefined();
  });

  test('are carried across continue-as-new: the run holds its key through its hand-overs and gives it back at the end', { timeout: 600_000 }, async () => {
    const tenant = `c-${Math.random().toString(36).slice(2, 8)}`;
    const key = `tenant:${tenant}`;
    const stages =
      Array.from({ length: 30 }, (_, i) => `  - id: s${i + 1}\n    prompt: "Do s${i + 1}."\n${i > 0 ? `    needs: [s${i}]\n` : ''}`).join('') +
      '  - id: release\n    needs: [s30]\n    approval: true\n';
    const long = await harness.start(await harness.writePipeline('carried', header('carried', 'continueAsNew: { afterEvents: 100 }\n') + stages), { tenant }, `carried-${tenant}`);
    // Once the run has handed over (it waits for a person at its end), another run of the key still waits for it.
    await waitForWaiting(long, 'release', 'approval', 300_000);
    const after = await harness.start(await harness.writePipeline('after', header('after') + '  - id: only\n    prompt: Do it.\n'), { tenant }, `after-${tenant}`);
    await waitForState(after, (s) => s.leaseWait !== undefined);
    await new RunHandle(harness.client, long.workflowId).approve({ stage: 'release' });
    const final = await new RunHandle(harness.client, long.workflowId).result();
    expect(final.status).toBe('completed');
    const afterState = await harness.finish(after);
    expect(afterState.status).toBe('completed');
    expect(stageOf(afterState, 'only').startedAt!).toBeGreaterThanOrEqual(final.finishedAt!);

    // The later executions were handed the key, and did not ask for it again.
    const description = await harness.client.workflow.getHandle(long.workflowId).describe();
    const history = await harness.client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId: long.workflowId, runId: description.runId }, maximumPageSize: 1 });
    const input = defaultPayloadConverter.fromPayload<PipelineRunInput>(history.history!.events![0].workflowExecutionStartedEventAttributes!.input!.payloads![0]);
    expect(input.carryOver?.executions).toBeGreaterThanOrEqual(1);
    expect(input.carryOver?.leases).toEqual([key]);
    expect(final.leases).toBeUndefined();
    expect(await leases.describe(key)).toBeUndefined();
  });

  test('are taken back from a run that was terminated (it could not give them back) once another run waits', { timeout: 300_000 }, async () => {
    const tenant = `x-${Math.random().toString(36).slice(2, 8)}`;
    const key = `tenant:${tenant}`;
    const file = await harness.writePipeline('terminated', header('terminated') + '  - id: gate\n    prompt: Do the work.\n    approval: true\n');
    const first = await harness.start(file, { tenant }, `terminated-first-${tenant}`);
    await waitForWaiting(first, 'gate', 'approval');
    const second = await harness.start(file, { tenant }, `terminated-second-${tenant}`);
    await waitForState(second, (s) => s.leaseWait !== undefined);
    await first.terminate('gone without a word');
    // Within RUN_CHECK_MS (15 s) of the wait, the key's workflow finds the holder closed and grants the next run.
    await waitForWaiting(second, 'gate', 'approval', 120_000);
    expect(await holders(key)).toEqual([`run ${second.workflowId}`]);
    await new RunHandle(harness.client, second.workflowId).approve({ stage: 'gate' });
    expect((await harness.finish(second)).status).toBe('completed');
    expect(await leases.describe(key)).toBeUndefined();
  });
});
