import type { Payload, SerializationContext } from '@temporalio/common';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { CLAIM_KEY_METADATA, ClaimCheckCodec, ClaimCheckError, withSharedClaims } from '../../src/codec/claim-check-codec.js';
import { FileStore } from '../../src/store/file-store.js';
import { runKeyPrefix } from '../../src/store/run-keys.js';
import { recordedRuns, sweepGoneRuns } from '../../src/store/run-records.js';
import { ageFiles } from '../helpers/age-files.js';

/*
 * Claimed payloads live and go with their run (issue 29, lifecycle): the claim check puts a payload of a known run
 * under that run's keys, a worker's codec records the run, and the sweep that deletes a gone run's objects deletes its
 * claims with them. A payload of no known run goes to the shared `claims/`, and such references resolve too.
 */

const big = (letter: string): Payload => ({ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(JSON.stringify(letter.repeat(2000))) });
const workflow = (workflowId: string): SerializationContext => ({ type: 'workflow', namespace: 'default', workflowId });
const textOf = (payload: Payload): string => Buffer.from(payload.data ?? new Uint8Array()).toString();
const keyOf = (payload: Payload): string => Buffer.from(payload.metadata?.[CLAIM_KEY_METADATA] ?? new Uint8Array()).toString();

describe('claims per run', () => {
  let dir: string;
  let store: FileStore;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'claims-per-run-'));
    store = new FileStore(dir);
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const keys = async (prefix: string): Promise<string[]> => {
    const all: string[] = [];
    for await (const key of store.list(prefix)) all.push(key);
    return all.sort();
  };

  test("a worker's claim goes under its run's keys with the run's record, and the sweep of the gone run deletes it", async () => {
    const worker = new ClaimCheckCodec({ store, thresholdBytes: 1000, recordRuns: true });
    const [gone] = await worker.encode([big('a')], workflow('run-gone'));
    const [live] = await worker.encode([big('b')], { type: 'activity', namespace: 'default', workflowId: 'run-live', isLocal: false });
    expect(keyOf(gone!)).toMatch(new RegExp(`^${runKeyPrefix('run-gone')}claims/[0-9a-f]{64}$`));
    expect(keyOf(live!)).toMatch(new RegExp(`^${runKeyPrefix('run-live')}claims/[0-9a-f]{64}$`));
    const recorded: string[] = [];
    for await (const run of recordedRuns(store)) recorded.push(run.runId);
    expect(recorded.sort()).toEqual(['run-gone', 'run-live']);

    // As old as a run's objects are once the namespace's retention has passed (the sweep keeps younger ones).
    await ageFiles(dir);
    expect(await sweepGoneRuns(store, 'default', async (runId) => runId === 'run-gone')).toEqual(['run-gone']);
    expect(await keys(runKeyPrefix('run-gone'))).toEqual([]);
    expect(textOf((await worker.decode([live!]))[0]!)).toBe(textOf(big('b')));
    await expect(worker.decode([gone!])).rejects.toThrow(ClaimCheckError);
  });

  test("a client's claim records no run (it may precede the run); the first worker that reads it does", async () => {
    const client = new ClaimCheckCodec({ store, thresholdBytes: 1000 });
    const [input] = await client.encode([big('c')], workflow('run-started'));
    expect(await keys('runs/')).toEqual([keyOf(input!)]);
    const worker = new ClaimCheckCodec({ store, thresholdBytes: 1000, recordRuns: true });
    // Read without a run's context (a fork reading its source's start input): no run is recorded for this claim.
    await worker.decode([input!]);
    expect(await keys('runs/')).toEqual([keyOf(input!)]);
    expect(textOf((await worker.decode([input!], workflow('run-started')))[0]!)).toBe(textOf(big('c')));
    expect(await keys('runs/')).toEqual([keyOf(input!), `${runKeyPrefix('run-started')}run.json`].sort());
  });

  test('a payload of no known run is claimed into the shared claims/, and such references still resolve', async () => {
    const codec = new ClaimCheckCodec({ store, thresholdBytes: 1000, recordRuns: true });
    const [shared] = await codec.encode([big('d')]);
    expect(keyOf(shared!)).toMatch(/^claims\/[0-9a-f]{64}$/);
    expect(await keys('runs/')).toEqual([]);
    expect(textOf((await codec.decode([shared!], workflow('any')))[0]!)).toBe(textOf(big('d')));
    // History names no other key: not another prefix, not a run's other objects.
    const forged = { ...shared!, metadata: { ...shared!.metadata, [CLAIM_KEY_METADATA]: Buffer.from(`${runKeyPrefix('x')}checkpoints/${'0'.repeat(64)}`) } };
    await expect(codec.decode([forged])).rejects.toThrow(/not a claim's key/);
  });

  test("a run never reads another run's claim: a reference to it in the run's own payloads is refused", async () => {
    const worker = new ClaimCheckCodec({ store, thresholdBytes: 1000, recordRuns: true });
    const [theirs] = await worker.encode([big('e')], workflow('their-run'));
    // Copied from their history (it names the key in plain) into a start input, or an update, of another run.
    await expect(worker.decode([theirs!], workflow('my-run'))).rejects.toThrow(/names runs\/[0-9a-f]{64}\/claims\/[0-9a-f]{64}, a payload another run keeps/);
    await expect(worker.decode([theirs!], { type: 'activity', namespace: 'default', workflowId: 'my-run', isLocal: false })).rejects.toThrow(ClaimCheckError);
    // Their own run reads it, and so does a reader of no run (a fork's look at its source, the codec server).
    expect(textOf((await worker.decode([theirs!], workflow('their-run')))[0]!)).toBe(textOf(big('e')));
    expect(textOf((await worker.decode([theirs!]))[0]!)).toBe(textOf(big('e')));
  });

  test("a schedule's action is claimed into the shared claims/, which the schedule's runs (named <schedule>-<time>) read", async () => {
    const client = new ClaimCheckCodec({ store, thresholdBytes: 1000 });
    const [action] = await withSharedClaims([client])[0]!.encode([big('f')], workflow('nightly'));
    expect(keyOf(action!)).toMatch(/^claims\/[0-9a-f]{64}$/);
    const worker = new ClaimCheckCodec({ store, thresholdBytes: 1000, recordRuns: true });
    expect(textOf((await worker.decode([action!], workflow('nightly-2030-01-01T02:00:00Z')))[0]!)).toBe(textOf(big('f')));
  });
});
