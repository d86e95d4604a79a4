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

/** Runs recorded by this process, per store: a record is written once per run and process. */
const recorded = new WeakMap<ObjectStore, Set<string>>();

/** Writes run `runId`'s record, once per process. */
export async function recordRun(store: ObjectStore, record: RunRecord): Promise<void> {
  const known = recorded.get(store) ?? new Set<string>();
  recorded.set(store, known);
  const id = `${record.namespace}\n${record.runId}`;
  if (known.has(id)) return;
  await store.put(`${runKeyPrefix(record.runId)}${RUN_RECORD_OBJECT}`, Buffer.from(`${JSON.stringify(record)}\n`));
  known.add(id);
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
 * Deletes the objects of every recorded run of `namespace` that `isGone` says Temporal no longer keeps (at most `limit`
 * runs a pass); runs of other namespaces, and runs it cannot tell about, are left alone.
 * @returns the run ids whose objects were deleted
 */
export async function sweepGoneRuns(store: ObjectStore, namespace: string, isGone: (runId: string) => Promise<boolean>, limit = 1000): Promise<string[]> {
  const deleted: string[] = [];
  let asked = 0;
  for await (const run of recordedRuns(store)) {
    if (run.namespace !== namespace) continue;
    if (++asked > limit) break;
    if (!(await isGone(run.runId).catch(() => false))) continue;
    await store.deletePrefix(run.prefix);
    deleted.push(run.runId);
  }
  return deleted;
}
