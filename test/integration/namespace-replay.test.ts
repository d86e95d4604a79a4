import { Client, Connection, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, RawValue, type Payload } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { defineSignal, defineUpdate } from '@temporalio/workflow';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { LeaseClient } from '../../src/activities/leases/lease-client.js';
import { payloadCodecsFor } from '../../src/codec/data-converter.js';
import { describeLeaseQuery, LEASE_WORKFLOW_TYPE } from '../../src/contracts/lease-messages.js';
import { answerStageUpdate, getStatusQuery } from '../../src/contracts/messages.js';
import { RunHandle } from '../../src/library/run-handle.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import { waitForState, waitForWaiting } from './workflow-helpers.js';
import { createHarness, type Harness } from '../helpers/harness.js';

/*
 * A namespace client without the encryption key cannot write a key holder's message, but it can read one in history
 * and send it again, unchanged: AES-GCM proves who wrote a payload, not which message it was for. The encrypted
 * argument of a worker's acquireLease (`{ holder, … }`) sent as releaseLease gave the holder's key back while it still
 * worked (and as renewLease kept it). Key holders now seal each message (contracts/message-seal.ts), and a workflow
 * refuses a message of a holder sealed no later than one it took from it: a copy sent again to the same workflow.
 * Real Temporal, a real encrypting worker; the stranger sends raw payloads copied from the workflows' histories.
 */

const ENCRYPTION_KEY = `rp:${randomBytes(32).toString('base64')}`;
const rand = (): string => Math.random().toString(36).slice(2, 8);
const releaseLease = defineUpdate<unknown, [unknown]>('releaseLease');
const renewLease = defineUpdate<unknown, [unknown]>('renewLease');
const releaseLeaseSignal = defineSignal<[unknown]>('releaseLeaseSignal');
const acquireLease = defineUpdate<unknown, [unknown]>('acquireLease');
const leaseWait = defineSignal<[unknown]>('leaseWait');

let harness: Harness;
let strangerConnection: Connection;
/** A client of the namespace without the key: it decodes (to read why it was refused) but cannot encrypt. */
let stranger: Client;
/** The same stranger sending values of its own: plain JSON. */
let strangerPlain: Client;

beforeAll(async () => {
  // The one run's stage answers at once (the anthropic-api backend against the scripted model), then waits for approval.
  const done = `Done.\n\`\`\`json\n${JSON.stringify({ success: true, summary: 'done', outputs: {} })}\n\`\`\``;
  harness = await createHarness('namespace-replay', { encryptionKey: ENCRYPTION_KEY, scenario: { rules: [{ match: 'Pipeline: ', turns: [{ text: done }], repeatLastTurn: true }] } });
  strangerConnection = await Connection.connect({ address: inject('temporalAddress') });
  const [codec] = payloadCodecsFor(ENCRYPTION_KEY);
  stranger = new Client({ connection: strangerConnection, dataConverter: { payloadCodecs: [{ encode: async (payloads) => payloads, decode: (payloads) => codec!.decode(payloads) }] } });
  strangerPlain = new Client({ connection: strangerConnection });
});
afterAll(async () => {
  await strangerConnection?.close();
  await harness?.close();
});

/** The lease workflow keeping `key`'s book, once it has a holder. */
async function bookOf(key: string): Promise<string> {
  for (;;) {
    for await (const info of harness.client.workflow.list({ query: `WorkflowType = '${LEASE_WORKFLOW_TYPE}' AND ExecutionStatus = 'Running'` })) {
      const state = await harness.client.workflow.getHandle(info.workflowId).query(describeLeaseQuery).catch(() => undefined);
      if (state?.key === key && state.holders.length > 0) return info.workflowId;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The refusal's failure type, or `accepted`. */
async function outcome(sent: Promise<unknown>): Promise<string | undefined> {
  return sent.then(
    () => 'accepted',
    (e: unknown) => (e instanceof WorkflowUpdateFailedError && e.cause instanceof ApplicationFailure ? (e.cause.type ?? undefined) : String(e)),
  );
}

type History = temporal.api.history.v1.IHistory;

/** The encrypted arguments of the signals named `name` in a history, oldest first. */
function signalPayloads(history: History, name: string): Payload[] {
  return (history.events ?? []).flatMap((e) => {
    const signal = e.workflowExecutionSignaledEventAttributes;
    return signal?.signalName === name ? ((signal.input?.payloads ?? []) as Payload[]) : [];
  });
}

/** The encrypted arguments of the updates accepted in a history, oldest first. */
function updatePayloads(history: History): Payload[] {
  return (history.events ?? []).flatMap((e) => (e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.args?.payloads ?? []) as Payload[]);
}

/**
 * Returns once the run has handled every signal sent to it so far: an update is handled after the signals before it
 * in history, and its answer (here a refusal: the stage waits for an approval, not an answer) comes after that.
 */
async function handled(run: WorkflowHandle): Promise<void> {
  await run.executeUpdate(answerStageUpdate, { args: [{ stage: 'gate', text: 'sync' }] }).catch(() => undefined);
}

/** Waits until the key's book (holders, waiters) satisfies `ok`. */
async function waitForBook(leases: LeaseClient, key: string, ok: (holders: string[], waiters: string[]) => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await leases.describe(key);
    const [holders, waiters] = [state?.holders.map((h) => h.holder) ?? [], state?.waiters.map((w) => w.holder) ?? []];
    if (ok(holders, waiters)) return;
    if (Date.now() > deadline) throw new Error(`the book of ${key} never came to the expected state: holders ${holders.join(', ')}; waiters ${waiters.join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('a namespace client without the encryption key, sending again what a key holder wrote', () => {
  test("cannot give back or renew a holder's lease with the holder's own acquire, copied from history", { timeout: 120_000 }, async () => {
    const leases = new LeaseClient(harness.client, harness.taskQueue);
    const key = `replay:${rand()}`;
    const held = await leases.acquire({ key, limit: 1, holder: 'victim', ttlMs: 60_000 });
    const book = stranger.workflow.getHandle(await bookOf(key));
    // The acquire's argument in history: ciphertext the stranger cannot read, but can copy.
    const events = (await book.fetchHistory()).events ?? [];
    const copied = events.flatMap((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.args?.payloads ?? [])[0] as Payload;
    expect(Buffer.from(copied.metadata!.encoding!).toString()).toBe('binary/encrypted');

    expect(await outcome(book.executeUpdate(releaseLease, { args: [RawValue.fromPayload(copied)] }))).toBe('MESSAGE_NOT_AUTHENTICATED');
    expect(await outcome(book.executeUpdate(renewLease, { args: [RawValue.fromPayload(copied)] }))).toBe('MESSAGE_NOT_AUTHENTICATED');
    // A signal has no validator: the copy is ignored.
    await book.signal(releaseLeaseSignal, RawValue.fromPayload(copied));
    const state = await leases.describe(key);
    expect(state?.holders.map((h) => h.holder)).toEqual(['victim']);

    // The holder's own messages are taken: it renews and gives the key back.
    expect(await held.renew()).toBe(true);
    await held.release();
    expect(await leases.describe(key)).toBeUndefined();
  });

  test("cannot give back a holder's later lease with the release of its earlier one, copied from history", { timeout: 120_000 }, async () => {
    const leases = new LeaseClient(harness.client, harness.taskQueue);
    const key = `replay:${rand()}`;
    // One holder id takes the key twice (a client program's own holder, a run's key asked again after a retry).
    const first = await leases.acquire({ key, limit: 1, holder: 'victim', ttlMs: 60_000 });
    const id = first.ids[0]!;
    await first.release();
    await waitForBook(leases, key, (holders) => holders.length === 0);
    const second = await leases.acquire({ key, limit: 1, holder: 'victim', ttlMs: 60_000 });
    const book = stranger.workflow.getHandle(id);
    const copied = signalPayloads(await book.fetchHistory(), 'releaseLeaseSignal')[0]!;
    expect(Buffer.from(copied.metadata!.encoding!).toString()).toBe('binary/encrypted');

    // The first lease's release, sent again: the second lease stays held, and nobody else gets a key of limit 1.
    await book.signal(releaseLeaseSignal, RawValue.fromPayload(copied));
    const intruder = leases.acquire({ key, limit: 1, holder: 'intruder', ttlMs: 60_000 }, { pollMs: 500 });
    await waitForBook(leases, key, (holders, waiters) => waiters.includes('intruder') || holders.includes('intruder'));
    expect((await leases.describe(key))?.holders.map((h) => h.holder)).toEqual(['victim']);
    await second.release();
    await (await intruder).release();
  });

  test("cannot keep a dead holder's lease alive, nor take a given-back key for it, with its messages copied from history", { timeout: 120_000 }, async () => {
    const leases = new LeaseClient(harness.client, harness.taskQueue);
    const key = `replay:${rand()}`;
    const held = await leases.acquire({ key, limit: 1, holder: 'victim', ttlMs: 3_000 });
    expect(await held.renew()).toBe(true);
    const book = stranger.workflow.getHandle(held.ids[0]!);
    const [acquire, renew] = updatePayloads(await book.fetchHistory());
    // The holder dies: it renews no more. Its last renewal and its acquire, sent again every second for twice its ttl,
    // keep it alive no longer.
    const outcomes: (string | undefined)[] = [];
    for (let i = 0; i < 6; i++) {
      outcomes.push(await outcome(book.executeUpdate(renewLease, { args: [RawValue.fromPayload(renew!)] })));
      outcomes.push(await outcome(book.executeUpdate(acquireLease, { args: [RawValue.fromPayload(acquire!)] })));
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    expect(new Set(outcomes)).toEqual(new Set(['MESSAGE_REPLAYED']));
    await waitForBook(leases, key, (holders) => !holders.includes('victim'));
    // Given back, the key cannot be taken again for the gone holder with its copied acquire either.
    const next = await leases.acquire({ key, limit: 1, holder: 'next', ttlMs: 60_000 }, { pollMs: 500 });
    await next.release();
    expect(await outcome(book.executeUpdate(acquireLease, { args: [RawValue.fromPayload(acquire!)] }))).toBe('MESSAGE_REPLAYED');
    expect(await leases.describe(key)).toBeUndefined();
  });

  test("cannot make a run's status show a wait for a key that is over, with the run's own report copied from history, nor stop the run with a report of its own", { timeout: 180_000 }, async () => {
    const leases = new LeaseClient(harness.client, harness.taskQueue);
    const tenant = rand();
    const key = `tenant:${tenant}`;
    const blocker = await leases.acquire({ key, limit: 1, holder: 'blocker', ttlMs: 60_000 });
    const yaml = `name: waits\ninputs: { tenant: { description: t } }\nlimits: [{ key: "tenant:{{inputs.tenant}}", concurrency: 1 }]\n` +
      'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }\nstages:\n' +
      `  - id: gate\n    prompt: Do the work.\n    approval: true\n`;
    const file = await harness.writePipeline('waits', yaml);
    const run = await harness.start(file, { tenant }, `waits-${tenant}`);
    await waitForState(run, (s) => s.leaseWait?.key === key);
    await blocker.release();
    await waitForWaiting(run, 'gate', 'approval');
    const status = async (): Promise<RunState> => run.query(getStatusQuery);
    expect((await status()).leaseWait).toBeUndefined();

    // The run's report that it waited, sent again by the stranger, then one of its own, unencrypted: neither is taken.
    const view = stranger.workflow.getHandle(run.workflowId);
    const [waited] = signalPayloads(await view.fetchHistory(), 'leaseWait');
    expect(Buffer.from(waited!.metadata!.encoding!).toString()).toBe('binary/encrypted');
    await view.signal(leaseWait, RawValue.fromPayload(waited!));
    await handled(run);
    expect((await status()).leaseWait).toBeUndefined();
    await strangerPlain.workflow.getHandle(run.workflowId).signal(leaseWait, { key, ahead: 7, holders: 1, limit: 1 });
    await handled(run);
    expect((await status()).leaseWait).toBeUndefined();
    // Nor does a report that is no report fail the run's workflow task (it did, at every try: the run took nothing more).
    await strangerPlain.workflow.getHandle(run.workflowId).signal(leaseWait, null);
    await handled(run);
    expect((await run.fetchHistory()).events?.filter((e) => e.workflowTaskFailedEventAttributes)).toEqual([]);

    await new RunHandle(harness.client, run.workflowId).approve({ stage: 'gate' });
    expect((await harness.finish(run)).status).toBe('completed');
    expect(await leases.describe(key)).toBeUndefined();
  });
});
