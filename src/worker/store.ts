import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError, type PayloadCodec } from '@temporalio/common';
import { Runtime, type Worker } from '@temporalio/worker';
import { checkpointSettingsFromEnv, CheckpointSettingError, type CheckpointOptions } from '../activities/checkpoint/settings.js';
import { openWorkerSubfolder, storeFolder } from '../activities/workspace/worker-folder.js';
import { storeOfCodecs, storePayloadCodecs } from '../codec/data-converter.js';
import { ENCRYPTION_KEY_VARIABLE } from '../codec/encryption-key.js';
import { ConfigError } from '../config.js';
import { settledWithin } from '../activities/settled-within.js';
import { isPassingOutage, type ObjectStore } from '../store/object-store.js';
import { sweepGoneRuns } from '../store/run-records.js';
import { STORE_VARIABLE } from '../store/store-settings.js';

/*
 * The worker's object store: made with its payload codecs, where it keeps checkpoints, and swept of the runs Temporal
 * no longer keeps.
 */

/**
 * The worker's codecs (encryption when a key is set, then the claim check that moves payloads over
 * AGENT_PIPELINE_CLAIM_CHECK_BYTES to the store) and its store (AGENT_PIPELINE_STORE). Made before connecting: a
 * malformed key or store setting stops the worker at once, naming the variable.
 */
export async function workerCodecs(env: NodeJS.ProcessEnv, workspacesRoot: string, keyOption: string | undefined): Promise<{ codecs: PayloadCodec[]; store: ObjectStore; encryptionKey?: string }> {
  const encryptionKey = keyOption ?? env[ENCRYPTION_KEY_VARIABLE];
  const keySource = keyOption === undefined ? {} : { keySource: 'the encryptionKey option' };
  const reportStoreWait = (message: string) => Runtime.instance().logger.warn(message);
  const codecs = storePayloadCodecs(env, { defaultStoreDir: storeFolder(workspacesRoot), role: 'worker', encryptionKey, reportStoreWait, ...keySource });
  // The default store is the worker's own folder: made as real folders, never through a symlink.
  if (!env[STORE_VARIABLE]?.trim()) await openWorkerSubfolder(workspacesRoot, 'store');
  return { codecs, store: storeOfCodecs(codecs)!, encryptionKey };
}

/**
 * A first request to the store before the worker takes work: a store that refuses it (credentials, a missing bucket)
 * stops the worker, naming the setting (exit 2), instead of failing every stage the worker would take. A store that
 * does not answer within `answerMs` is only warned of: the worker starts, and its runs wait for the store.
 * @throws ConfigError `CONFIG_INVALID` with the store's refusal
 */
export async function checkStoreAtStart(store: ObjectStore, warn: (message: string) => void, answerMs = 10_000): Promise<void> {
  const probe = (async () => {
    for await (const _key of store.list('runs/')) break;
  })();
  const outcome = await settledWithin(probe, answerMs);
  if (outcome?.status === 'fulfilled') return;
  if (!outcome) return warn(`the object store ${store.description} did not answer within ${answerMs / 1000} s; the worker starts, and its runs wait for the store (AGENT_PIPELINE_STORE_WAIT)`);
  const err: unknown = outcome.reason;
  const message = err instanceof Error ? err.message : String(err);
  // An outage that outlasted AGENT_PIPELINE_STORE_WAIT may still pass; a refusal, or a folder store that cannot be read, will not.
  if (isPassingOutage(err)) return warn(message);
  throw new ConfigError(`[CONFIG_INVALID] ${message.includes(store.description) ? message : `the object store ${store.description} cannot be used: ${message}`}`);
}

/**
 * Where and how often the worker checkpoints its runs (docs/deployment.md): in its object store
 * (`AGENT_PIPELINE_STORE`); none with `AGENT_PIPELINE_CHECKPOINTS=off`.
 * @throws ConfigError naming the setting that is malformed
 */
export function checkpointsFromEnv(env: NodeJS.ProcessEnv, store: ObjectStore): CheckpointOptions | undefined {
  try {
    const settings = checkpointSettingsFromEnv(env);
    if (!settings.enabled) return undefined;
    return { store, everyMs: settings.everyMs, maxBytes: settings.maxBytes, ...(settings.forkPointsOnly ? { forkPointsOnly: true } : {}) };
  } catch (err) {
    if (err instanceof CheckpointSettingError) throw new ConfigError(`[CONFIG_INVALID] ${err.message}`);
    throw err;
  }
}

/**
 * Every `everyMs` while the worker runs (the first pass a minute after it starts, or sooner with a shorter interval),
 * deletes the stored objects of runs of its namespace that Temporal no longer keeps: describing such a run finds none.
 */
export function sweepStoreWhileRunning(worker: Worker, store: ObjectStore, client: Client, everyMs: number): void {
  const isGone = (runId: string) =>
    client.workflow.getHandle(runId).describe().then(
      () => false,
      (err: unknown) => err instanceof WorkflowNotFoundError,
    );
  const pass = async (): Promise<void> => {
    const state = worker.getState();
    if (state === 'STOPPED' || state === 'FAILED') return clearInterval(timer);
    if (state !== 'RUNNING') return;
    const deleted = await sweepGoneRuns(store, worker.options.namespace, isGone).catch((err: unknown) => {
      Runtime.instance().logger.warn(`the store sweep of ${store.description} failed: ${err instanceof Error ? err.message : String(err)}`);
      return [];
    });
    if (deleted.length > 0) Runtime.instance().logger.info(`deleted the stored objects of ${deleted.length} run(s) Temporal no longer keeps`, { runs: deleted.slice(0, 20) });
  };
  const first = setTimeout(() => void pass(), Math.min(everyMs, 60_000));
  const timer = setInterval(() => void pass(), everyMs);
  first.unref();
  timer.unref();
}
