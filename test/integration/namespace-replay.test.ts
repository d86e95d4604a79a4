import { Client, Connection, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure, RawValue, type Payload } from '@temporalio/common';
import { defineSignal, defineUpdate } from '@temporalio/workflow';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { LeaseClient } from '../../src/activities/leases/lease-client.js';
import { payloadCodecsFor } from '../../src/codec/data-converter.js';
import { describeLeaseQuery, LEASE_WORKFLOW_TYPE } from '../../src/contracts/lease-messages.js';
import { createHarness, type Harness } from '../helpers/harness.js';

/*
 * A namespace client without the encryption key cannot write a key holder's message, but it can read one in history
 * and send it again, unchanged: AES-GCM proves who wrote a payload, not which message it was for. The encrypted
 * argument of a worker's acquireLease (`{ holder, … }`) sent as releaseLease gave the holder's key back while it still
 * worked (and as renewLease kept it). Key holders now seal each message (contracts/message-seal.ts). Real Temporal,
 * a real encrypting worker; the stranger sends raw payloads copied from the lease workflow's history.
 */

const ENCRYPTION_KEY = `rp:${randomBytes(32).toString('base64')}`;
const rand = (): string => Math.random().toString(36).slice(2, 8);
const releaseLease = defineUpdate<unknown, [unknown]>('releaseLease');
const renewLease = defineUpdate<unknown, [unknown]>('renewLease');
const releaseLeaseSignal = defineSignal<[unknown]>('releaseLeaseSignal');

let harness: Harness;
let strangerConnection: Connection;
/** A client of the namespace without the key: it decodes (to read why it was refused) but cannot encrypt. */
let stranger: Client;

beforeAll(async () => {
  harness = await createHarness('namespace-replay', { encryptionKey: ENCRYPTION_KEY, scenario: { rules: [] } });
  strangerConnection = await Connection.connect({ address: inject('temporalAddress') });
  const [codec] = payloadCodecsFor(ENCRYPTION_KEY);
  stranger = new Client({ connection: strangerConnection, dataConverter: { payloadCodecs: [{ encode: async (payloads) => payloads, decode: (payloads) => codec!.decode(payloads) }] } });
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
});
