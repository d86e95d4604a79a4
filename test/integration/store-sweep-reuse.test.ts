import type { Payload } from '@temporalio/common';
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ClaimCheckCodec } from '../../src/codec/claim-check-codec.js';
import { FileStore } from '../../src/store/file-store.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import { openStore } from '../../src/store/open-store.js';
import { runKeyPrefix } from '../../src/store/run-keys.js';
import { recordRun, sweepGoneRuns } from '../../src/store/run-records.js';
import { ageFiles } from '../helpers/age-files.js';
import { startVersitygw, versitygwOrSkip, type Versitygw } from '../helpers/versitygw.js';

/*
 * A run id is reused once Temporal no longer keeps the run that bore it (docs/deployment.md, "How long stored objects
 * live"). The store's sweep (store/run-records.ts) deletes the gone run's objects under the id, never a later run's:
 * not those written between its question to Temporal and its delete, not a client's claim of the new run's input
 * written just before it asked; and the later run's objects keep a record, so the sweep deletes them once that run is
 * gone too. On a folder store and on a real S3 server (versitygw), with the gone run's objects made old by their
 * files' times, as the namespace's retention makes them.
 */

const binary = await versitygwOrSkip('the store sweep tests on s3://');
const NS = 'default';
const RUN = { runId: 'reused', namespace: NS };
const PREFIX = runKeyPrefix(RUN.runId);
const hex = (text: string): string => createHash('sha256').update(text).digest('hex');
const checkpoint = (execution: string): string => `${PREFIX}executions/${hex(execution)}/checkpoints/000000000000001-aabbccdd/manifest.json`;
const INPUT_CLAIM = `${PREFIX}claims/${hex('input')}`;

interface World {
  /** A worker's store. */
  store: ObjectStore;
  /** The same store as another worker process opens it (a memo of its own). */
  other: () => ObjectStore;
  /** Makes every object in the store old. */
  age: () => Promise<void>;
  close: () => Promise<void>;
}

async function fileWorld(): Promise<World> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sweep-reuse-'));
  return { store: new FileStore(dir), other: () => new FileStore(dir), age: () => ageFiles(dir), close: () => rm(dir, { recursive: true, force: true }) };
}

async function s3World(server: Versitygw, bucket: string): Promise<World> {
  await server.createBucket(bucket);
  const open = () => openStore(server.storeEnv(bucket, 'team'), { defaultDir: os.tmpdir() });
  return { store: open(), other: open, age: () => ageFiles(path.join(server.folder, bucket)), close: async () => undefined };
}

async function keysOf(store: ObjectStore): Promise<string[]> {
  const all: string[] = [];
  for await (const key of store.list('runs/')) all.push(key);
  return all.sort();
}

/** The gone run: recorded, its input claimed, a checkpoint; all of it old. */
async function goneRun(world: World): Promise<void> {
  await recordRun(world.store, RUN);
  await world.store.put(INPUT_CLAIM, Buffer.from('input'));
  await world.store.put(checkpoint('old-execution'), Buffer.from('{}'));
  await world.age();
}

const worlds: Array<[string, () => Promise<World>]> = [['a folder store', fileWorld]];
let server: Versitygw | undefined;
let buckets = 0;
if (binary) worlds.push(['an s3:// store', () => s3World(server!, `sweep-reuse-${++buckets}`)]);

beforeAll(async () => {
  if (binary) server = await startVersitygw(binary);
}, 60_000);
afterAll(async () => {
  await server?.stop();
});

describe.each(worlds)('the store sweep on %s, when a run id is reused', (_name, makeWorld) => {
  test('keeps what a new run of the id wrote between the question to Temporal and the delete, and sweeps it once that run is gone', async () => {
    const world = await makeWorld();
    try {
      await goneRun(world);
      const newRun = world.other();
      // Temporal had no run of the id when asked; a new run of it starts before the sweep deletes: its client claims the
      // same input (the same bytes, so the same key), its worker records the run and takes a checkpoint.
      const isGone = async (): Promise<boolean> => {
        await newRun.put(INPUT_CLAIM, Buffer.from('input'));
        await recordRun(newRun, RUN);
        await newRun.put(checkpoint('new-execution'), Buffer.from('{}'));
        return true;
      };
      await sweepGoneRuns(world.store, NS, isGone);
      expect(await keysOf(world.store)).toEqual([INPUT_CLAIM, checkpoint('new-execution'), `${PREFIX}run.json`].sort());
      // While the new run lives, nothing of it goes.
      expect(await sweepGoneRuns(world.store, NS, async () => false)).toEqual([]);
      // Once it is gone too, all of it goes.
      await world.age();
      expect(await sweepGoneRuns(world.store, NS, async () => true)).toEqual([RUN.runId]);
      expect(await keysOf(world.store)).toEqual([]);
    } finally {
      await world.close();
    }
  });

  test("keeps a new run's input its client claimed just before the question, while Temporal has not started the run yet", async () => {
    const world = await makeWorld();
    try {
      await goneRun(world);
      const claim = `${PREFIX}claims/${hex('another input')}`;
      await world.other().put(claim, Buffer.from('another input'));
      await sweepGoneRuns(world.store, NS, async () => true);
      // The claim stays, and the record with it, so that a later pass finds it.
      expect(await keysOf(world.store)).toEqual([claim, `${PREFIX}run.json`].sort());
      await world.age();
      expect(await sweepGoneRuns(world.store, NS, async () => true)).toEqual([RUN.runId]);
      expect(await keysOf(world.store)).toEqual([]);
    } finally {
      await world.close();
    }
  });

  test('records a new run of a swept id again in the process that recorded the gone run, so that its claims are swept', async () => {
    const world = await makeWorld();
    try {
      const codec = new ClaimCheckCodec({ store: world.store, thresholdBytes: 100, recordRuns: true });
      const payload = (text: string): Payload => ({ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(JSON.stringify(text.repeat(200))) });
      const context = { type: 'workflow' as const, namespace: NS, workflowId: RUN.runId };
      await codec.encode([payload('a')], context);
      await world.age();
      expect(await sweepGoneRuns(world.store, NS, async () => true)).toEqual([RUN.runId]);
      // A new run of the id, on the same worker: its claim comes with a record.
      await codec.encode([payload('b')], context);
      expect(await keysOf(world.store)).toContain(`${PREFIX}run.json`);
      await world.age();
      expect(await sweepGoneRuns(world.store, NS, async () => true)).toEqual([RUN.runId]);
      expect(await keysOf(world.store)).toEqual([]);
    } finally {
      await world.close();
    }
  });
});
