import type { ObjectStore } from './object-store.js';
import { runKeyPrefix } from './run-keys.js';

/*
 * Every run with objects in the store has a record beside them, `runs/<sha256 of the run id>/run.json`: which run and
 * namespace the prefix belongs to (the prefix is a hash, so it says neither). The sweep reads the records to ask Temporal
 * which runs it no longer keeps: once a run has ended and the namespace's retention has passed, nothing can read or
 * fork it any more, and its objects go (docs/deployment.md, "How long stored objects live").
 */

/** The record's object name under a run's prefix. */
export const RUN_RECORD_OBJECT = 'run.json';
/** Largest record read. @unit bytes */
const MAX_RECORD_BYTES = 4096;

/** What a run's record says. */
export interface RunRecord {
  runId: string;
  namespace: string;
}

/**
 * How long a process trusts its own write of a run's record, and skips writing it again: less than SWEEP_MARGIN_MS, so
 * that a record a process trusts is always too young for any sweep to delete (see sweepGoneRuns). @unit milliseconds
 */
const RECORD_TRUSTED_MS = 10 * 60_000;

/**
 * When this process last wrote each run's record, per store, run id, then namespace and execution: by
 * `performance.now()`, a clock that no one sets back or forth.
 */
const recorded = new WeakMap<ObjectStore, Map<string, Map<string, number>>>();

/**
 * Writes run `runId`'s record, unless this process wrote it for the same `execution` less than RECORD_TRUSTED_MS ago.
 * @param execution the Temporal run id of the execution, when the caller knows it: a later run of a reused id writes its
 *   record again at once, even where a `prune` just deleted the record of the run before it
 */
export async function recordRun(store: ObjectStore, record: RunRecord, execution = ''): Promise<void> {
  const runs = recorded.get(store) ?? new Map<string, Map<string, number>>();
  recorded.set(store, runs);
  const writes = runs.get(record.runId) ?? new Map<string, number>();
  runs.set(record.runId, writes);
  const key = JSON.stringify([record.namespace, execution]);
  const startedAt = performance.now();
  const last = writes.get(key);
  if (last !== undefined && startedAt - last < RECORD_TRUSTED_MS) return;
  await writeRecord(store, record);
  // From the write's start: the store's time of the record is no earlier.
  writes.set(key, startedAt);
}

async function writeRecord(store: ObjectStore, record: RunRecord): Promise<void> {
  const body = { runId: record.runId, namespace: record.namespace };
  await store.put(`${runKeyPrefix(record.runId)}${RUN_RECORD_OBJECT}`, Buffer.from(`${JSON.stringify(body)}\n`));
}

/** The runs recorded in the store, with their prefixes; a record that cannot be read or does not match its prefix is left out. */
export async function* recordedRuns(store: ObjectStore): AsyncIterable<RunRecord & { prefix: string }> {
  for await (const key of store.list('runs/')) {
    const match = /^(runs\/[0-9a-f]{64}\/)run\.json$/.exec(key);
    if (!match) continue;
    const record = parseRecord(await store.get(key, MAX_RECORD_BYTES).catch(() => undefined));
    // A record copied under another run's prefix would have the sweep delete that run's objects: never.
    if (record && runKeyPrefix(record.runId) === match[1]) yield { ...record, prefix: match[1] };
  }
}

function parseRecord(bytes: Uint8Array | undefined): RunRecord | undefined {
  if (!bytes) return undefined;
  try {
    const value = JSON.parse(Buffer.from(bytes).toString('utf8')) as Partial<RunRecord>;
    return typeof value.runId === 'string' && typeof value.namespace === 'string' ? { runId: value.runId, namespace: value.namespace } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * How much younger than the sweep's question to Temporal an object under a gone run's id must be to stay: a run of
 * the id that started after the answer writes only younger objects, and its client claims its input just before
 * starting it. Objects of a run Temporal no longer keeps are older than the namespace's retention (days, usually), so
 * the margin delays little else: a run deleted by hand right after it ended goes a pass later. @unit milliseconds
 */
const SWEEP_MARGIN_MS = 60 * 60_000;
/** The object the sweep writes to read the store's clock. */
const CLOCK_OBJECT = 'sweep-clock';

/**
 * Deletes the objects of every recorded run of `namespace` that `isGone` says Temporal no longer keeps (at most `limit`
 * runs a pass); runs of other namespaces, and runs it cannot tell about, are left alone.
 *
 * A run id may be reused once Temporal no longer keeps the run that bore it, and a new run of it may start the moment
 * after Temporal answered that it has none. So the sweep deletes only the objects written more than SWEEP_MARGIN_MS
 * before it asked, by the store's own clock (the write time of an object it writes first): workers that share a store
 * need not share a clock, as only the store's times are compared. Whatever stays keeps a record (written again when it
 * went with the old objects), so a later pass finds it, and deletes it once that run is gone too. A process trusts its
 * own record for less than the margin (recordRun), so no sweep deletes a record that a process would not write again.
 * What is left: an object the gone run wrote that a new run writes again (its record, or an unencrypted input claim
 * of the same bytes, hence the same key) between the sweep's listing and its delete, milliseconds apart, is deleted;
 * S3 offers no portable delete-if-unchanged.
 * @returns the run ids whose objects were all deleted
 */
export async function sweepGoneRuns(store: ObjectStore, namespace: string, isGone: (runId: string) => Promise<boolean>, limit = 1000): Promise<string[]> {
  const deleted: string[] = [];
  let asked = 0;
  let clockMs: number | undefined;
  for await (const run of recordedRuns(store)) {
    if (run.namespace !== namespace) continue;
    if (++asked > limit) break;
    // Read before the first question, so that it precedes every answer.
    clockMs ??= await storeClock(store);
    if (!(await isGone(run.runId).catch(() => false))) continue;
    if (await deleteGoneRun(store, run, clockMs - SWEEP_MARGIN_MS)) deleted.push(run.runId);
  }
  return deleted;
}

/** Deletes the objects under a gone run's prefix written before `beforeMs`; what stays keeps a record. @returns whether none stays */
async function deleteGoneRun(store: ObjectStore, run: RunRecord & { prefix: string }, beforeMs: number): Promise<boolean> {
  // This process writes the record again for whatever it writes under the id next.
  recorded.get(store)?.delete(run.runId);
  await store.deletePrefix(run.prefix, { modifiedBeforeMs: beforeMs });
  for await (const _key of store.list(run.prefix)) {
    await writeRecord(store, run);
    return false;
  }
  return true;
}

/** The store's time now, by its own clock: when it wrote an object written for the purpose. @unit milliseconds since the epoch */
async function storeClock(store: ObjectStore): Promise<number> {
  await store.put(CLOCK_OBJECT, Buffer.from(`${new Date().toISOString()}\n`));
  for await (const object of store.listModified(CLOCK_OBJECT)) if (object.key === CLOCK_OBJECT) return object.modifiedMs;
  throw new Error(`the object store ${store.description} did not list ${CLOCK_OBJECT} right after it was written`);
}
