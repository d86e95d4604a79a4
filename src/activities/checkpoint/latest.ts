import type { ObjectStore } from '../../store/object-store.js';
import type { RunRef } from '../../pipeline/run-state.js';
import { checkpointsPrefix, listCheckpoints } from './keys.js';

/*
 * The run's index of its checkpoints in the store, `checkpoints/latest.json`: the newest complete checkpoint, and the
 * ones a later checkpoint may replace (not stages' first starts, which forks start from). With it, an attempt finds
 * the checkpoint to restore from, and a checkpoint the ones to forget, in one read each, instead of listing the run's
 * checkpoints, which grow with the run (every stage's first start is kept). Only the run's owner writes it, after
 * the manifest it names; a run checkpointed before it existed is listed once, then has it.
 */

export const LATEST_OBJECT = 'latest.json';
/** Largest index read: a few dozen ids. @unit bytes */
const MAX_LATEST_BYTES = 64 * 1024;

export interface LatestCheckpoints {
  /** The newest complete checkpoint. */
  id: string;
  /** Checkpoints (oldest first) that are not a stage's first start: the ones a later checkpoint may delete. */
  replaceable: string[];
}

const latestKey = (run: RunRef): string => `${checkpointsPrefix(run)}${LATEST_OBJECT}`;

/** The run's index, or undefined when there is none (no checkpoint yet, or one taken before the index) or it is unreadable. */
export async function readLatestCheckpoints(store: ObjectStore, run: RunRef): Promise<LatestCheckpoints | undefined> {
  const bytes = await store.get(latestKey(run), MAX_LATEST_BYTES);
  if (!bytes) return undefined;
  try {
    const value = JSON.parse(Buffer.from(bytes).toString('utf8')) as Partial<LatestCheckpoints>;
    const ids = (list: unknown): list is string[] => Array.isArray(list) && list.every((id) => typeof id === 'string');
    return typeof value.id === 'string' && ids(value.replaceable) ? { id: value.id, replaceable: value.replaceable } : undefined;
  } catch {
    return undefined;
  }
}

/** The id of the run's newest complete checkpoint: its index's, or for a run checkpointed before there was one, listed. */
export async function newestCheckpointId(store: ObjectStore, run: RunRef): Promise<string | undefined> {
  return (await readLatestCheckpoints(store, run))?.id ?? (await listCheckpoints(store, run)).at(-1);
}

export async function writeLatestCheckpoints(store: ObjectStore, run: RunRef, latest: LatestCheckpoints): Promise<void> {
  await store.put(latestKey(run), Buffer.from(`${JSON.stringify(latest)}\n`));
}
