import { toMilliseconds } from '../../pipeline/duration.js';
import type { ObjectStore } from '../../store/object-store.js';
import { STORE_VARIABLE } from '../../store/store-settings.js';

/**
 * `on` or `off`. Unset, checkpoints are on when the worker has an object store of its own (`AGENT_PIPELINE_STORE`); with
 * the default one (a folder beside the workspaces on the same disk, which survives nothing the workspaces would not)
 * only each stage's first-start checkpoint of the workspace is taken, which a fork starts from. `on` takes them all
 * there anyway; `off` takes none (and no run of the worker can be forked).
 */
export const CHECKPOINTS_VARIABLE = 'AGENT_PIPELINE_CHECKPOINTS';
/** How often a running stage is checkpointed when its pipeline sets no `checkpoint.every`. */
export const CHECKPOINT_EVERY_VARIABLE = 'AGENT_PIPELINE_CHECKPOINT_EVERY';
/** The largest checkpoint object (a workspace bundle or archive, the bookkeeping archive). */
export const CHECKPOINT_MAX_BYTES_VARIABLE = 'AGENT_PIPELINE_CHECKPOINT_MAX_BYTES';

/** @unit milliseconds */
export const DEFAULT_CHECKPOINT_EVERY_MS = 5 * 60_000;
/** @unit bytes */
export const DEFAULT_CHECKPOINT_MAX_BYTES = 2 * 1024 ** 3;
/**
 * The cap of a fork point when the worker takes only those: one is taken at every stage's start, of a run folder
 * whole, so a folder an agent filled (a `node_modules`) is not archived again and again. @unit bytes
 */
export const DEFAULT_FORK_POINT_MAX_BYTES = 256 * 1024 ** 2;

/** When and where a worker checkpoints its runs. */
export interface CheckpointOptions {
  /** Where checkpoints are written and read. */
  store: ObjectStore;
  /** A running stage's checkpoint interval unless its pipeline sets `checkpoint.every`. @unit milliseconds */
  everyMs: number;
  /** Largest object of one checkpoint. @unit bytes */
  maxBytes: number;
  /**
   * Only the checkpoint of a stage's first start, of the workspace alone (no bookkeeping): what a fork starts from, not
   * what a run restores from on another host. The default without a store of the worker's own.
   */
  forkPointsOnly?: boolean;
}

/** Thrown for a malformed checkpoint setting, naming the variable, the value and what is expected. */
export class CheckpointSettingError extends Error {
  override readonly name = 'CheckpointSettingError';
}

/**
 * The worker's checkpoint settings from its environment (see {@link CHECKPOINTS_VARIABLE} for when they are on).
 * @throws CheckpointSettingError for a value that is not understood
 */
export function checkpointSettingsFromEnv(env: NodeJS.ProcessEnv): { enabled: boolean; forkPointsOnly: boolean; everyMs: number; maxBytes: number } {
  const mode = (env[CHECKPOINTS_VARIABLE] || (env[STORE_VARIABLE]?.trim() ? 'on' : 'fork-points')).trim().toLowerCase();
  if (!['on', 'off', 'fork-points', ''].includes(mode)) throw new CheckpointSettingError(`${CHECKPOINTS_VARIABLE}=${env[CHECKPOINTS_VARIABLE]} is not understood; expected on, off or fork-points`);
  const every = env[CHECKPOINT_EVERY_VARIABLE]?.trim();
  let everyMs = DEFAULT_CHECKPOINT_EVERY_MS;
  if (every) {
    try {
      everyMs = toMilliseconds(every);
    } catch {
      everyMs = Number.NaN;
    }
    if (!(everyMs >= 1_000)) throw new CheckpointSettingError(`${CHECKPOINT_EVERY_VARIABLE}=${every} is not a duration of at least 1s (such as 30s, 5m)`);
  }
  const max = env[CHECKPOINT_MAX_BYTES_VARIABLE]?.trim();
  const maxBytes = max ? Number(max) : mode === 'fork-points' ? DEFAULT_FORK_POINT_MAX_BYTES : DEFAULT_CHECKPOINT_MAX_BYTES;
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) throw new CheckpointSettingError(`${CHECKPOINT_MAX_BYTES_VARIABLE}=${max} is not a whole number of bytes`);
  return { enabled: mode !== 'off', forkPointsOnly: mode === 'fork-points', everyMs, maxBytes };
}

/** The workspaces root setting, named in messages about paths that must be the same on every worker. */
export const WORKSPACES_VARIABLE_NAME = 'AGENT_PIPELINE_WORKSPACES';
