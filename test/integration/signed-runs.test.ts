import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, defaultPayloadConverter } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PipelineClient } from '../../src/library/index.js';
import { startRun } from '../../src/library/runs.js';
import { generateSigningKey, parseSigningKey } from '../../src/trust/keys.js';
import { RunSigner } from '../../src/trust/signer.js';
import { signRunInput } from '../../src/trust/signatures.js';
import type { PipelineRunInput } from '../../src/workflows/messages.js';
import { createHarness, type Harness } from '../helpers/harness.js';
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
  return { type: type ?? undefined, message, nonRetryable };
}

/** The run's start input as stored in its history. */
async function startInput(harness: Harness, workflowId: string): Promise<PipelineRunInput> {
  const page = await harness.client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId }, maximumPageSize: 1 });
  const payload = page.history!.events![0].workflowExecutionStartedEventAttributes!.input!.payloads![0];
  return defaultPayloadConverter.fromPayload<PipelineRunInput>(payload);
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

    // The library signs decisions with the client's key (AGENT_PIPELINE_SIGNING_KEY here).
    const approved = await deciding.getRun(run.id).approve({ stage: 'gate2' });
    expect(stageOf(approved, 'gate2').status).toBe('completed');
    const final = await run.result();
    expect(final.status).toBe('completed');
  });
});
