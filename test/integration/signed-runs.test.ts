import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, defaultPayloadConverter } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { definePipeline, PipelineClient } from '../../src/library/index.js';
import { startRun } from '../../src/library/runs.js';
import { generateSigningKey, parseSigningKey } from '../../src/trust/keys.js';
import { RunSigner } from '../../src/trust/signer.js';
import { signRunInput } from '../../src/trust/signatures.js';
import type { PipelineRunInput } from '../../src/contracts/messages.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { testFolder } from '../helpers/test-folder.js';
import { eventually, parseJson, runCli } from './cli-helpers.js';
import { stageOf, waitForWaiting } from './workflow-helpers.js';

/*
 * Signed runs and decisions against a real worker: a worker with AGENT_PIPELINE_TRUSTED_KEYS runs only inputs signed
 * by one of them for that workflow id and not expired, and with AGENT_PIPELINE_DECISION_KEYS takes only decisions
 * signed by one of those. Refused runs fail before any stage starts, so these tests need no agent until a gate.
 */

const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const HEADER = (name: string, extra = ''): string =>
  `name: ${name}\n${extra}defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }\nstages:\n`;
const GATED =
  `${HEADER('signed-gate')}  - id: gate\n    approval: true\n  - id: gate2\n    approval: true\n    needs: [gate]\n` +
  '  - id: after\n    prompt: Do after.\n    needs: [gate2]\n';

/** The failure a run ended with (type and message), as Temporal reports it. */
async function runFailure(handle: WorkflowHandle): Promise<{ type?: string; message: string; nonRetryable?: boolean }> {
  const err = await handle.result().then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(WorkflowFailedError);
  const cause = (err as WorkflowFailedError).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  const { type, message, nonRetryable } = cause as ApplicationFailure;
  return { type: type ?? undefined, message, nonRetryable: nonRetryable ?? undefined };
}

/** The run's start input as stored in its history. */
async function startInput(harness: Harness, workflowId: string): Promise<PipelineRunInput> {
  const page = await harness.client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId }, maximumPageSize: 1 });
  const payload = page.history!.events![0].workflowExecutionStartedEventAttributes!.input!.payloads![0];
  return defaultPayloadConverter.fromPayload<PipelineRunInput>(payload);
}

/** How many times an execution ran the run-trust check: its local-activity markers naming checkRunTrust. */
async function trustChecks(harness: Harness, workflowId: string, runId: string): Promise<number> {
  const history = await harness.client.workflow.getHandle(workflowId, runId).fetchHistory();
  return (history.events ?? []).filter((event) => {
    const details = event.markerRecordedEventAttributes?.details ?? {};
    return Object.values(details).some((p) => (p.payloads ?? []).some((x) => Buffer.from(x.data ?? []).toString().includes('"checkRunTrust"')));
  }).length;
}

describe('signed runs and decisions', () => {
  const starter = generateSigningKey('starter');
  const decider = generateSigningKey('decider');
  const stranger = generateSigningKey('stranger');
  let harness: Harness;
  let starting: PipelineClient;
  let deciding: PipelineClient;
  let unsigned: PipelineClient;
  let file: string;

  beforeAll(async () => {
    harness = await createHarness('signed', {
      scenario: { rules: [{ match: 'Pipeline: signed-', turns: [{ text: report('done') }], repeatLastTurn: true }] },
      env: { AGENT_PIPELINE_TRUSTED_KEYS: starter.publicLine, AGENT_PIPELINE_DECISION_KEYS: decider.publicLine },
    });
    // The library signs with the key it is given (connect({ signingKey })), whatever the environment says.
    starting = await PipelineClient.connect({ env: harness.env, signingKey: starter.privateLine });
    deciding = await PipelineClient.connect({ env: { ...harness.env, AGENT_PIPELINE_SIGNING_KEY: decider.privateLine } });
    unsigned = await PipelineClient.connect({ env: harness.env });
    file = await harness.writePipeline('signed-gate', GATED);
  });
  afterAll(async () => {
    await Promise.all([starting?.close(), deciding?.close(), unsigned?.close()]);
    await harness?.close();
  });

  const handleOf = (id: string): WorkflowHandle => harness.client.workflow.getHandle(id);

  test('an unsigned run fails RUN_NOT_TRUSTED at once, not retried, before any stage starts', async () => {
    const run = await unsigned.start(file);
    const failure = await runFailure(handleOf(run.id));
    expect(failure).toMatchObject({ type: 'RUN_NOT_TRUSTED', nonRetryable: true });
    expect(failure.message).toContain(`run ${run.id} is not trusted: it is not signed`);
    expect(harness.modelServer.requests()).toHaveLength(0);
    // `status` tells why, with the code a script can match.
    const status = await runCli(['status', run.id], harness.env);
    expect(status.all).toContain('RUN_NOT_TRUSTED');
    expect(status.all).toContain('it is not signed');
  });

  test('a run signed by a key the worker does not trust fails RUN_NOT_TRUSTED naming the key', async () => {
    const strangers = await PipelineClient.connect({ env: harness.env, signingKey: stranger.privateLine });
    try {
      const run = await strangers.start(file);
      const failure = await runFailure(handleOf(run.id));
      expect(failure).toMatchObject({ type: 'RUN_NOT_TRUSTED' });
      expect(failure.message).toContain('signed by key "stranger", which is not in the worker\'s AGENT_PIPELINE_TRUSTED_KEYS');
    } finally {
      await strangers.close();
    }
  });

  test('a signed input replayed under another workflow id fails RUN_NOT_TRUSTED; so does a changed input', async () => {
    const prepared = await starting.prepare(file);
    const signed = new RunSigner(parseSigningKey(starter.privateLine)).signRun({ version: 1, ...prepared }, 'signed-original');
    const replayId = `signed-replay-${Math.random().toString(36).slice(2, 8)}`;
    const { handle } = await startRun(harness.client, signed, { taskQueue: harness.taskQueue, id: replayId });
    expect((await startInput(harness, replayId)).signature).toEqual(signed.signature);
    const replayed = await runFailure(handle);
    expect(replayed).toMatchObject({ type: 'RUN_NOT_TRUSTED' });
    expect(replayed.message).toContain('does not match: it was made for another run id or another input');

    const tamperedId = `signed-tampered-${Math.random().toString(36).slice(2, 8)}`;
    const forThisId = new RunSigner(parseSigningKey(starter.privateLine)).signRun({ version: 1, ...prepared }, tamperedId);
    const tampered = { ...forThisId, inputs: { ...forThisId.inputs, extra: 'added after signing' } };
    const { handle: second } = await startRun(harness.client, tampered, { taskQueue: harness.taskQueue, id: tamperedId });
    expect(await runFailure(second)).toMatchObject({ type: 'RUN_NOT_TRUSTED' });
  });

  test('an expired signature fails RUN_NOT_TRUSTED saying when it expired', async () => {
    const prepared = await starting.prepare(file);
    const id = `signed-expired-${Math.random().toString(36).slice(2, 8)}`;
    const input = { version: 1, ...prepared };
    const expiresAt = Date.now() - 1000;
    const signature = signRunInput(parseSigningKey(starter.privateLine), input, id, expiresAt);
    const { handle } = await startRun(harness.client, { ...input, signature }, { taskQueue: harness.taskQueue, id });
    const failure = await runFailure(handle);
    expect(failure).toMatchObject({ type: 'RUN_NOT_TRUSTED' });
    expect(failure.message).toContain(`its signature expired at ${new Date(expiresAt).toISOString()}`);
  });

  test('the CLI signs with AGENT_PIPELINE_SIGNING_KEY: its run is accepted and reaches its gate', async () => {
    const started = await runCli(['start', file, '--json'], { ...harness.env, AGENT_PIPELINE_SIGNING_KEY: starter.privateLine });
    expect(started.exitCode, started.all).toBe(0);
    const { runId } = parseJson<{ runId: string }>(started);
    expect(started.all).not.toContain(starter.privateLine.split(':')[1]);
    await waitForWaiting(handleOf(runId), 'gate', 'approval');
    await handleOf(runId).terminate('test done');
  });

  test('a definition built in code is bundled with its agent and step files and signed like a file: the worker runs it (issue 34)', async () => {
    const baseDir = await testFolder('signed-definition-');
    await mkdir(path.join(baseDir, 'agents'));
    await mkdir(path.join(baseDir, 'steps'));
    await writeFile(path.join(baseDir, 'agents', 'helper.md'), '---\nname: helper\ndescription: helps\n---\nYou help.\n');
    await writeFile(path.join(baseDir, 'steps', 'do.md'), 'Do the thing.\n');
    const definition = definePipeline({
      name: 'signed-definition',
      defaults: { backend: 'anthropic-api', model: 'haiku', retries: 0, maxTokens: 500 },
      stages: [
        { id: 'gate', approval: true },
        { id: 'work', agent: 'agents/helper.md', prompt: 'steps/do.md', needs: ['gate'] },
      ],
    });
    const run = await starting.start(definition, { baseDir });
    await waitForWaiting(handleOf(run.id), 'gate', 'approval');
    const input = await startInput(harness, run.id);
    expect(Object.keys(input.bundle?.files ?? {}).sort()).toEqual(['agents/helper.md', 'signed-definition.pipeline.yaml', 'steps/do.md']);
    expect(input.signature?.keyId).toBe('starter');
    await handleOf(run.id).terminate('test done');
  });

  test('a signed --files-from-worker run is refused without AGENT_PIPELINE_ALLOW_WORKER_FILES=1', async () => {
    const run = await starting.start(file, { filesFromWorker: true });
    const failure = await runFailure(handleOf(run.id));
    expect(failure).toMatchObject({ type: 'RUN_NOT_TRUSTED' });
    expect(failure.message).toContain('--files-from-worker');
    expect(failure.message).toContain('AGENT_PIPELINE_ALLOW_WORKER_FILES=1');
  });

  test('a signed run waits at its gate; unsigned, start-key and reused decisions are refused DECISION_NOT_TRUSTED and the gate still waits; a decision key\'s approve passes', async () => {
    const run = await starting.start(file);
    expect((await startInput(harness, run.id)).signature).toMatchObject({ keyId: 'starter' });
    const handle = handleOf(run.id);
    await waitForWaiting(handle, 'gate', 'approval');

    await expect(unsigned.getRun(run.id).approve({ stage: 'gate' })).rejects.toMatchObject({
      code: 'DECISION_NOT_TRUSTED',
      message: expect.stringContaining('the decision is not signed'),
    });
    // The key that may start runs may not decide: AGENT_PIPELINE_DECISION_KEYS names another.
    await expect(starting.getRun(run.id).approve({ stage: 'gate' })).rejects.toMatchObject({
      code: 'DECISION_NOT_TRUSTED',
      message: expect.stringContaining('signed by key "starter", which is not in the worker\'s AGENT_PIPELINE_DECISION_KEYS'),
    });
    // A decision signed for another run is worth nothing here.
    const elsewhere = new RunSigner(parseSigningKey(decider.privateLine)).signDecision('another-run', 'approveStage', { stage: 'gate' });
    const mismatch = await handle.executeUpdate('approveStage', { args: [elsewhere] }).then(() => undefined, (e: unknown) => e);
    expect(((mismatch as { cause?: ApplicationFailure }).cause)?.type).toBe('DECISION_NOT_TRUSTED');
    expect(stageOf(await handle.query('getStatus'), 'gate').status).toBe('waiting');

    // Signed by the decision key for this run: taken once. The same signed decision sent again is refused.
    const signedApprove = new RunSigner(parseSigningKey(decider.privateLine)).signDecision(run.id, 'approveStage', { stage: 'gate', comment: 'signed' });
    const first = await handle.executeUpdate<{ stages: { id: string; status: string }[] }, [typeof signedApprove]>('approveStage', { args: [signedApprove] });
    expect(first.stages.find((s) => s.id === 'gate')?.status).toBe('completed');
    await waitForWaiting(handle, 'gate2', 'approval');
    const again = await handle.executeUpdate('approveStage', { args: [{ ...signedApprove, stage: 'gate2' }] }).then(() => undefined, (e: unknown) => e);
    expect(((again as { cause?: ApplicationFailure }).cause)?.type).toBe('DECISION_NOT_TRUSTED');
    const reused = await handle.executeUpdate('approveStage', { args: [signedApprove] }).then(() => undefined, (e: unknown) => e);
    expect(((reused as { cause?: ApplicationFailure }).cause)?.message).toContain('was used already');
    expect(stageOf(await handle.query('getStatus'), 'gate2').status).toBe('waiting');

    // The CLI without a key: exit 2 naming the code; the stage still waits.
    const cli = await runCli(['approve', run.id, '--stage', 'gate2'], harness.env);
    expect(cli.exitCode, cli.all).toBe(2);
    expect(cli.stderr).toContain('[DECISION_NOT_TRUSTED] the decision is not signed');
    expect(stageOf(await handle.query('getStatus'), 'gate2').status).toBe('waiting');

    // The library signs decisions with the client's key (AGENT_PIPELINE_SIGNING_KEY here).
    const approved = await deciding.getRun(run.id).approve({ stage: 'gate2' });
    expect(stageOf(approved, 'gate2').status).toBe('completed');
    const final = await run.result();
    expect(final.status).toBe('completed');
  });

  test('a schedule stores a signed action its runs are accepted with; an update without the key leaves it unsigned (refused), an update with it signs again', async () => {
    const id = `signed-schedule-${Math.random().toString(36).slice(2, 8)}`;
    const schedule = harness.client.schedule.getHandle(id);
    const actionSignature = async (): Promise<unknown> => {
      const action = (await schedule.describe()).action;
      return action.type === 'startWorkflow' ? (action.args?.[0] as PipelineRunInput).signature : undefined;
    };
    /** Triggers the schedule and returns the handle of the run it started. */
    const triggered = async (count: number): Promise<WorkflowHandle> => {
      await schedule.trigger();
      const described = await eventually(() => schedule.describe(), (d) => d.info.recentActions.length >= count, 30_000, 'the schedule starting a run');
      return handleOf(described.info.recentActions[count - 1].action.workflow.workflowId);
    };
    try {
      await starting.schedules.create(file, { id, every: '1d', paused: true });
      // A paused schedule's runs are refused, its triggered ones too (schedule-replay.test.ts): unpaused, they run.
      await schedule.unpause();
      const created = await actionSignature();
      expect(created).toMatchObject({ keyId: 'starter', schedule: true });
      const accepted = await triggered(1);
      expect(accepted.workflowId.startsWith(`${id}-`)).toBe(true);
      await waitForWaiting(accepted, 'gate', 'approval');
      await accepted.terminate('test done');

      await unsigned.schedules.update(file, { id });
      expect(await actionSignature()).toBeUndefined();
      expect(await runFailure(await triggered(2))).toMatchObject({ type: 'RUN_NOT_TRUSTED' });

      await starting.schedules.update(file, { id });
      const renewed = (await actionSignature()) as { nonce: string; expiresAt: number };
      expect(renewed).toMatchObject({ keyId: 'starter', schedule: true });
      expect(renewed.nonce).not.toBe((created as { nonce: string }).nonce);
      // Signed for a year from now (SCHEDULE_SIGNATURE_TTL_MS): the schedule's runs are accepted until then.
      expect(renewed.expiresAt).toBeGreaterThan(Date.now() + 300 * 24 * 3600 * 1000);
      expect((await starting.schedules.describe(id)).signature).toEqual({ keyId: 'starter', expiresAt: renewed.expiresAt });
      const again = await triggered(3);
      await waitForWaiting(again, 'gate', 'approval');
      await again.terminate('test done');
    } finally {
      await schedule.delete().catch(() => undefined);
    }
  });

  test('after continue-as-new the run keeps its verdict: decisions must still be signed, and the start is not checked again', async () => {
    const chain = Array.from({ length: 20 }, (_, i) => `  - id: c${i + 1}\n    prompt: Do c${i + 1}.\n${i > 0 ? `    needs: [c${i}]\n` : ''}`);
    const yaml = HEADER('signed-handover', 'continueAsNew: { afterEvents: 100 }\n') + chain.join('') + '  - id: gate\n    approval: true\n    needs: [c20]\n';
    const run = await starting.start(await harness.writePipeline('signed-handover', yaml));
    const handle = handleOf(run.id);
    await waitForWaiting(handle, 'gate', 'approval', 180_000);
    const described = await handle.describe();
    // The waiting execution is a continued one: its input carries the verdict of the first.
    const current = await harness.client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId: run.id, runId: described.runId }, maximumPageSize: 1 });
    const attributes = current.history!.events![0].workflowExecutionStartedEventAttributes!;
    expect(attributes.continuedExecutionRunId).toBeTruthy();
    const input = defaultPayloadConverter.fromPayload<PipelineRunInput>(attributes.input!.payloads![0]);
    expect(input.carryOver?.trust?.verdict).toEqual({ signedBy: 'starter', decisionsSigned: true });
    // Checked by the first execution only (a local activity, recorded as a marker), not by the continued one.
    expect(await trustChecks(harness, run.id, attributes.firstExecutionRunId!)).toBe(1);
    expect(await trustChecks(harness, run.id, described.runId)).toBe(0);

    await expect(unsigned.getRun(run.id).approve({ stage: 'gate' })).rejects.toMatchObject({ code: 'DECISION_NOT_TRUSTED' });
    const approved = await deciding.getRun(run.id).approve({ stage: 'gate' });
    expect(stageOf(approved, 'gate').status).toBe('completed');
    expect((await run.result()).status).toBe('completed');
  }, 300_000);
});
