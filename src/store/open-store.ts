import { EncryptedStore, type StoreKey } from './encrypted-store.js';
import { FileStore } from './file-store.js';
import type { ObjectStore } from './object-store.js';
import { S3Store } from './s3-store.js';
import { storeSettingsFromEnv, storeWaitMs, type StoreSettings } from './store-settings.js';
import { WaitingStore, type StoreWaitReport } from './waiting-store.js';

/** Options of {@link openStore}. */
export interface OpenStoreOptions {
  /**
   * The folder of the default store, when `AGENT_PIPELINE_STORE` is unset: the workers' own folder under the
   * workspaces root (`<root>/.agent-pipeline/store`, activities/workspace/worker-folder.ts), out of every agent's reach.
   */
  defaultDir: string;
  /** The keys of `AGENT_PIPELINE_ENCRYPTION_KEY` (the first encrypts): everything written is encrypted with them. */
  encryptionKeys?: readonly StoreKey[];
  /**
   * How long an `s3://` store's operations wait out an outage when `AGENT_PIPELINE_STORE_WAIT` is unset (a duration),
   * and where its reports go. @default no wait: a client fails at once, and its user runs the command again
   */
  wait?: { fallback: string; report?: StoreWaitReport };
}

/** The store of `settings`, not yet contacted (an `s3://` store loads its SDK and connects on first use). */
export function storeOf(settings: StoreSettings): ObjectStore {
  return settings.kind === 'file' ? new FileStore(settings.dir) : new S3Store(settings);
}

/**
 * The store of the environment's `AGENT_PIPELINE_STORE` (and its `AGENT_PIPELINE_STORE_*` settings), for workers and
 * clients alike; encrypting when keys are given.
 * @throws ConfigError `CONFIG_INVALID` naming the variable that is wrong and how to fix it
 */
export function openStore(env: NodeJS.ProcessEnv, options: OpenStoreOptions): ObjectStore {
  const settings = storeSettingsFromEnv(env, options.defaultDir);
  const waitMs = settings.kind === 's3' ? storeWaitMs(env, options.wait?.fallback ?? '0') : 0;
  // A folder store's failures are the disk's, which waiting does not mend.
  const store = waitMs > 0 ? new WaitingStore(storeOf(settings), waitMs, options.wait?.report) : storeOf(settings);
  return options.encryptionKeys?.length ? new EncryptedStore(store, options.encryptionKeys) : store;
}
