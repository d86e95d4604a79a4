import { createHash, randomBytes } from 'node:crypto';
import type { RunRef } from '../../pipeline/run-state.js';
import { checkStoreKey, type ObjectStore } from '../../store/object-store.js';
import { runKeyPrefix } from '../../store/run-keys.js';

/*
 * Where a run's checkpoints live in the store: under the run id's prefix (`runs/<sha256 of the run id>/`, which the
 * store's sweep and `prune` delete), in `executions/<sha256 of its first execution's run id>/checkpoints/<id>/<object>`,
 * so each run that bore the id has checkpoints of its own; a run started before runs had folders of their own keeps
 * its checkpoints in `checkpoints/<id>/<object>`. Ids are hashed, never used as keys: keys hold no value a run brings.
 * Checkpoint ids sort by time (a zero-padded clock plus a random tail), so the newest complete checkpoint is the
 * greatest id that has a manifest.
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

/** The prefix of `run`'s own objects in the store: its id's prefix, then its first execution's (when it names one). */
export function executionKeyPrefix(run: RunRef): string {
  const id = runKeyPrefix(run.runId);
  return run.firstExecutionRunId === undefined ? id : `${id}executions/${sha256Hex(run.firstExecutionRunId)}/`;
}

/** The prefix of every checkpoint of `run`. */
export function checkpointsPrefix(run: RunRef): string {
  return `${checkStoreKey(`${executionKeyPrefix(run)}checkpoints`)}/`;
}

/** The key of `object` in checkpoint `id` of `run`. */
export function checkpointKey(run: RunRef, id: string, object: string): string {
  return checkStoreKey(`${checkpointsPrefix(run)}${id}/${object}`);
}

/** A new checkpoint id: later ids sort after earlier ones (within one clock). */
export function newCheckpointId(now = Date.now()): string {
  return `${String(now).padStart(15, '0')}-${randomBytes(4).toString('hex')}`;
}

/** The ids of `run`'s complete checkpoints (those with a manifest), oldest first. */
export async function listCheckpoints(store: ObjectStore, run: RunRef): Promise<string[]> {
  return (await listCheckpointEntries(store, run)).map((entry) => entry.id);
}

/** A complete checkpoint of a run, and whether it is a stage's first-start checkpoint. */
export interface CheckpointEntry {
  id: string;
  stageStart: boolean;
}

/** `run`'s complete checkpoints, oldest first. */
export async function listCheckpointEntries(store: ObjectStore, run: RunRef): Promise<CheckpointEntry[]> {
  const prefix = checkpointsPrefix(run);
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
