import { createHash, randomBytes } from 'node:crypto';
import { checkStoreKey, type ObjectStore } from '../../store/object-store.js';

/*
 * Where a run's checkpoints live in the store: `runs/<sha256 of the run id>/checkpoints/<id>/<object>`. The run id is
 * hashed, never used as a key: keys hold no value a run brings. Ids sort by time (a zero-padded clock plus a random
 * tail), so the newest complete checkpoint is the greatest id that has a manifest.
 */

export const MANIFEST_OBJECT = 'manifest.json';

/**
 * The object that marks a stage's first-start checkpoint: its body is the sha256 of the stage id, so the checkpoint of
 * a stage is found, and the kept ones told apart, without reading every manifest.
 */
export const STAGE_START_OBJECT = 'stage-start';

/** The sha256 of `text`, hex. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The prefix of every checkpoint of run `runId`. */
export function checkpointsPrefix(runId: string): string {
  return `${checkStoreKey(`runs/${sha256Hex(runId)}/checkpoints`)}/`;
}

/** The key of `object` in checkpoint `id` of run `runId`. */
export function checkpointKey(runId: string, id: string, object: string): string {
  return checkStoreKey(`${checkpointsPrefix(runId)}${id}/${object}`);
}

/** A new checkpoint id: later ids sort after earlier ones (within one clock). */
export function newCheckpointId(now = Date.now()): string {
  return `${String(now).padStart(15, '0')}-${randomBytes(4).toString('hex')}`;
}

/** The ids of run `runId`'s complete checkpoints (those with a manifest), oldest first. */
export async function listCheckpoints(store: ObjectStore, runId: string): Promise<string[]> {
  return (await listCheckpointEntries(store, runId)).map((entry) => entry.id);
}

/** A complete checkpoint of a run, and whether it is a stage's first-start checkpoint. */
export interface CheckpointEntry {
  id: string;
  stageStart: boolean;
}

/** Run `runId`'s complete checkpoints, oldest first. */
export async function listCheckpointEntries(store: ObjectStore, runId: string): Promise<CheckpointEntry[]> {
  const prefix = checkpointsPrefix(runId);
  const complete = new Set<string>();
  const stageStarts = new Set<string>();
  for await (const key of store.list(prefix)) {
    const [id, object, ...more] = key.slice(prefix.length).split('/');
    if (!id || more.length > 0) continue;
    if (object === MANIFEST_OBJECT) complete.add(id);
    if (object === STAGE_START_OBJECT) stageStarts.add(id);
  }
  return [...complete].sort().map((id) => ({ id, stageStart: stageStarts.has(id) }));
}
