import { EncryptedStore, type StoreKey } from './encrypted-store.js';
import { FileStore } from './file-store.js';
import type { ObjectStore } from './object-store.js';
import { S3Store } from './s3-store.js';
import { storeSettingsFromEnv, type StoreSettings } from './store-settings.js';

/** Options of {@link openStore}. */
export interface OpenStoreOptions {
  /**
   * The folder of the default store, when `AGENT_PIPELINE_STORE` is unset: the workers' own folder under the
   * workspaces root (`<root>/.agent-pipeline/store`, activities/workspace/worker-folder.ts), out of every agent's reach.
   */
  defaultDir: string;
  /** The keys of `AGENT_PIPELINE_ENCRYPTION_KEY` (the first encrypts): everything written is encrypted with them. */
  encryptionKeys?: readonly StoreKey[];
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
  const store = storeOf(storeSettingsFromEnv(env, options.defaultDir));
  return options.encryptionKeys?.length ? new EncryptedStore(store, options.encryptionKeys) : store;
}
