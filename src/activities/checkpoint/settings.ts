import { toMilliseconds } from '../../pipeline/duration.js';
import type { ObjectStore } from '../../store/object-store.js';
import { STORE_VARIABLE } from '../../store/store-settings.js';

/**
 * `on` or `off`. Unset, checkpoints are on when the worker has an object store of its own (`AGENT_PIPELINE_STORE`) and
 * off with the default one: that folder sits beside the workspaces on the same disk, so it survives nothing the
 * workspaces would not, while each checkpoint costs time and space. `on` takes them there anyway; `off` suits workers
 * that share one volume.
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

/** When and where a worker checkpoints its runs. */
export interface CheckpointOptions {
  /** Where checkpoints are written and read. */
  store: ObjectStore;
  /** A running stage's checkpoint interval unless its pipeline sets `checkpoint.every`. @unit milliseconds */
  everyMs: number;
  /** Largest object of one checkpoint. @unit bytes */
  maxBytes: number;
}

/** Thrown for a malformed checkpoint setting, naming the variable, the value and what is expected. */
export class CheckpointSettingError extends Error {
  override readonly name = 'CheckpointSettingError';
}

/**
 * The worker's checkpoint settings from its environment (see {@link CHECKPOINTS_VARIABLE} for when they are on).
 * @throws CheckpointSettingError for a value that is not understood
 */
export function checkpointSettingsFromEnv(env: NodeJS.ProcessEnv): { enabled: boolean; everyMs: number; maxBytes: number } {
  const mode = (env[CHECKPOINTS_VARIABLE] || (env[STORE_VARIABLE]?.trim() ? 'on' : 'off')).trim().toLowerCase();
  if (!['on', 'off', ''].includes(mode)) throw new CheckpointSettingError(`${CHECKPOINTS_VARIABLE}=${env[CHECKPOINTS_VARIABLE]} is not understood; expected on or off`);
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
  const maxBytes = max ? Number(max) : DEFAULT_CHECKPOINT_MAX_BYTES;
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) throw new CheckpointSettingError(`${CHECKPOINT_MAX_BYTES_VARIABLE}=${max} is not a whole number of bytes`);
  return { enabled: mode !== 'off', everyMs, maxBytes };
}

/** The workspaces root setting, named in messages about paths that must be the same on every worker. */
export const WORKSPACES_VARIABLE_NAME = 'AGENT_PIPELINE_WORKSPACES';
