import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, defaultPayloadConverter, defineSearchAttributeKey } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PipelineClient } from '../../src/library/index.js';
import { generateSigningKey } from '../../src/trust/keys.js';
import { getStatusQuery, PIPELINE_WORKFLOW_TYPE, type PipelineRunInput } from '../../src/contracts/messages.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { eventually } from './cli-helpers.js';
import { waitForWaiting } from './workflow-helpers.js';

/*
 * Issue 33, item 9: a schedule's signed action is the same input for every run it starts, so anyone who can read one
 * of those runs holds a signed input. Started by hand (under a name like the schedule's runs, even with the
 * TemporalScheduledById search attribute set), while the schedule is paused, after it was deleted, or from a schedule
 * created again under its id, it ran on a worker with trusted keys. Against the real server: each is refused
 * RUN_NOT_TRUSTED before any stage starts, and the schedule's own actions still run.
 */

const GATED = 'name: schedule-replay\ndefaults: { backend: anthropic-api, model: haiku, retries: 0 }\nstages:\n  - id: gate\n    approval: true\n';
const SCHEDULED_BY = defineSearchAttributeKey('TemporalScheduledById', 'KEYWORD');

/** How the run came out: refused (its failure's type and message), or accepted (it reached its gate). */
async function outcome(handle: WorkflowHandle): Promise<{ refused?: { type?: string; message: string }; accepted?: true }> {
  return eventually(
    async () => {
      const { status } = await handle.describe();
      if (status.name === 'FAILED') {
        const failure = await handle.result().then(() => undefined, (e: { cause?: ApplicationFailure }) => e.cause);
        return { refused: { type: failure?.type ?? undefined, message: failure?.message ?? '' } };
      }
      const state = await handle.query(getStatusQuery).catch(() => undefined);
      return state?.stages[0]?.waitingFor ? { accepted: true as const } : {};
    },
    (o) => o.refused !== undefined || o.accepted !== undefined,
    60_000,
    'the run to be refused or reach its gate',
  );
}

describe('a schedule\'s signed action', () => {
  const starter = generateSigningKey('starter');
  let harness: Harness;
  let starting: PipelineClient;
  let file: string;

  beforeAll(async () => {
    harness = await createHarness('sched-replay', { scenario: { rules: [] }, env: { AGENT_PIPELINE_TRUSTED_KEYS: starter.publicLine } });
    starting = await PipelineClient.connect({ env: harness.env, signingKey: starter.privateLine });
    file = await harness.writePipeline('schedule-replay', GATED);
  });
  afterAll(async () => {
    await starting?.close();
    await harness?.close();
  });

  /** Starts the copied input by hand, named as the schedule names its runs and claiming the schedule's attribute. */
  async function startCopy(input: PipelineRunInput, scheduleId: string, year: number): Promise<WorkflowHandle> {
    return harness.client.workflow.start(PIPELINE_WORKFLOW_TYPE, {
      taskQueue: harness.taskQueue,
      workflowId: `${scheduleId}-${year}-01-01T00:00:00Z`,
      args: [input],
      // Any client may set it on a start: the worker must not take it as proof.
      typedSearchAttributes: [{ key: SCHEDULED_BY, value: scheduleId }],
    });
  }

  test('runs only as that schedule\'s action: a copy started by hand, while paused, after deletion or on a schedule created again is refused', async () => {
    const id = `nightly-${Math.random().toString(36).slice(2, 8)}`;
    const schedule = harness.client.schedule.getHandle(id);
    const triggered = async (): Promise<WorkflowHandle> => {
      const before = (await schedule.describe()).info.recentActions.length;
      await schedule.trigger();
      const described = await eventually(() => schedule.describe(), (d) => d.info.recentActions.length > before, 30_000, 'the schedule starting a run');
      return harness.client.workflow.getHandle(described.info.recentActions.at(-1)!.action.workflow.workflowId);
    };
    try {
      await starting.schedules.create(file, { id, every: '1d' });
      // The schedule's own action runs.
      const own = await triggered();
      expect(await outcome(own)).toEqual({ accepted: true });
      const page = await harness.client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId: own.workflowId }, maximumPageSize: 1 });
      const copied = defaultPayloadConverter.fromPayload<PipelineRunInput>(page.history!.events![0].workflowExecutionStartedEventAttributes!.input!.payloads![0]);
      expect(copied.signature).toMatchObject({ keyId: 'starter', schedule: true });
      await own.terminate('seen');

      // Copied into a plain manual start: no schedule started it.
      const plain = await outcome(await harness.client.workflow.start(PIPELINE_WORKFLOW_TYPE, { taskQueue: harness.taskQueue, workflowId: `copy-${id}`, args: [copied] }));
      expect(plain.refused, JSON.stringify(plain)).toMatchObject({ type: 'RUN_NOT_TRUSTED', message: expect.stringContaining('was not started by a schedule') });

      // Copied into a manual start that claims the live schedule: not among the runs the schedule started.
      const byHand = await outcome(await startCopy(copied, id, 2031));
      expect(byHand.refused, JSON.stringify(byHand)).toMatchObject({ type: 'RUN_NOT_TRUSTED', message: expect.stringContaining(`not among the runs schedule ${id} started`) });

      // While the schedule is paused, a copy is refused (and so is the schedule's own trigger).
      await schedule.pause('maintenance');
      const paused = await outcome(await startCopy(copied, id, 2032));
      expect(paused.refused, JSON.stringify(paused)).toMatchObject({ type: 'RUN_NOT_TRUSTED', message: expect.stringContaining(`schedule ${id} is paused`) });

      // Unpaused, the schedule's own actions run again.
      await schedule.unpause();
      const again = await triggered();
      expect(await outcome(again)).toEqual({ accepted: true });
      await again.terminate('seen');

      // Deleted: a copy is refused.
      await schedule.delete();
      const deleted = await outcome(await startCopy(copied, id, 2033));
      expect(deleted.refused, JSON.stringify(deleted)).toMatchObject({ type: 'RUN_NOT_TRUSTED', message: expect.stringContaining(`schedule ${id} (its TemporalScheduledById) no longer exists`) });

      // Created again under the same id with the copied signed action (no key needed): another schedule, refused.
      await harness.client.schedule.create({
        scheduleId: id,
        spec: { intervals: [{ every: '1d' }] },
        action: { type: 'startWorkflow', workflowType: PIPELINE_WORKFLOW_TYPE, taskQueue: harness.taskQueue, workflowId: id, args: [copied] },
      });
      const recreated = await outcome(await triggered());
      expect(recreated.refused, JSON.stringify(recreated)).toMatchObject({ type: 'RUN_NOT_TRUSTED', message: expect.stringContaining('created again') });
    } finally {
      await schedule.delete().catch(() => undefined);
    }
  });

  test('a schedule created with a signing key starts no run before its action is signed, and keeps the pause state asked for', async () => {
    const id = `paused-${Math.random().toString(36).slice(2, 8)}`;
    try {
      const created = await starting.schedules.create(file, { id, every: '1d', paused: true });
      expect(created.paused).toBe(true);
      expect((await starting.schedules.describe(id)).signature).toMatchObject({ keyId: 'starter' });
      const running = await starting.schedules.create(file, { id: `${id}-on`, every: '1d' });
      expect(running.paused).toBe(false);
      await harness.client.schedule.getHandle(`${id}-on`).trigger();
      const described = await eventually(() => harness.client.schedule.getHandle(`${id}-on`).describe(), (d) => d.info.recentActions.length > 0, 30_000);
      const run = harness.client.workflow.getHandle(described.info.recentActions[0].action.workflow.workflowId);
      await waitForWaiting(run, 'gate', 'approval');
      await run.terminate('seen');
    } finally {
      await harness.client.schedule.getHandle(id).delete().catch(() => undefined);
      await harness.client.schedule.getHandle(`${id}-on`).delete().catch(() => undefined);
    }
  });
});
