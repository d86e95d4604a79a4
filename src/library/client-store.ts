import { existsSync } from 'node:fs';
import { storeFolder } from '../activities/workspace/worker-folder.js';
import { parseEncryptionKeys, ENCRYPTION_KEY_VARIABLE } from '../codec/encryption-key.js';
import { loadConfig } from '../config.js';
import type { ObjectStore } from '../store/object-store.js';
import { openStore } from '../store/open-store.js';
import { STORE_VARIABLE } from '../store/store-settings.js';

/*
 * The object store a client reads run objects from (a stage's whole final answer): opened from the client's own
 * settings, the same ones a worker reads (`AGENT_PIPELINE_STORE` and its `AGENT_PIPELINE_STORE_*` settings,
 * `AGENT_PIPELINE_ENCRYPTION_KEY`), so any host with them reads what the workers wrote. Without `AGENT_PIPELINE_STORE`,
 * the default store: the one in the workers' workspaces folder, which only a host that sees that folder can read.
 */

/** The client's store, and how it was chosen (for what its errors say). */
export interface ClientStore {
  store: ObjectStore;
  /** `AGENT_PIPELINE_STORE` is set here; otherwise `store` is the default store under `workspacesRoot`. */
  configured: boolean;
  /** The store decrypts with the client's keys. */
  encrypted: boolean;
  /** The workers' workspaces folder as this host sees it. */
  workspacesRoot: string;
}

/** What a client's store is opened from. */
export interface ClientStoreSettings {
  /** @default `process.env` */
  env?: NodeJS.ProcessEnv;
  /** The keys (`AGENT_PIPELINE_ENCRYPTION_KEY`'s form); an empty string for none. @default `AGENT_PIPELINE_ENCRYPTION_KEY` */
  encryptionKey?: string;
  /** The workers' workspaces folder as this host sees it. @default `AGENT_PIPELINE_WORKSPACES`, else `.agent-pipeline/workspaces` */
  workspacesRoot?: string;
}

/**
 * The client's store when it can be the workers': `AGENT_PIPELINE_STORE` is set here, or the default store's folder
 * exists in the workspaces folder this host sees. Undefined otherwise: a default store nobody wrote holds nothing.
 * @throws ConfigError `CONFIG_INVALID` naming the store or key setting that is malformed
 */
export function openWorkersStore(settings: ClientStoreSettings = {}): ObjectStore | undefined {
  const { store, configured, workspacesRoot } = openClientStore(settings);
  return configured || existsSync(storeFolder(workspacesRoot)) ? store : undefined;
}

/**
 * The store of the client's settings; nothing is contacted yet.
 * @throws ConfigError `CONFIG_INVALID` naming the store or key setting that is malformed
 */
export function openClientStore(settings: ClientStoreSettings = {}): ClientStore {
  const env = settings.env ?? process.env;
  const workspacesRoot = settings.workspacesRoot ?? loadConfig(env).workspacesRoot;
  const key = (settings.encryptionKey ?? env[ENCRYPTION_KEY_VARIABLE])?.trim();
  const keys = key ? parseEncryptionKeys(key, settings.encryptionKey === undefined ? ENCRYPTION_KEY_VARIABLE : 'the encryptionKey option') : undefined;
  return {
    store: openStore(env, { defaultDir: storeFolder(workspacesRoot), encryptionKeys: keys }),
    configured: Boolean(env[STORE_VARIABLE]?.trim()),
    encrypted: Boolean(keys),
    workspacesRoot,
  };
}
