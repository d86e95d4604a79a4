import type { KeyObject } from 'node:crypto';
import { ConfigError } from '../errors.js';
import { encryptionSecretValues } from '../codec/encryption-key.js';
import { DECISION_KEYS_VARIABLE, parsePublicKeys, SIGNING_KEY_VARIABLE, TRUSTED_KEYS_VARIABLE } from './keys.js';

export const ALLOW_WORKER_FILES_VARIABLE = 'AGENT_PIPELINE_ALLOW_WORKER_FILES';

/**
 * Whom a worker trusts, from its environment. Two lists: keys that may start runs and keys that may decide for them,
 * so a person (or a bot) that approves need not be able to start, and the other way round.
 */
export interface WorkerTrust {
  /** Keys whose signed runs the worker runs (`AGENT_PIPELINE_TRUSTED_KEYS`); empty: every run is accepted. */
  runKeys: ReadonlyMap<string, KeyObject>;
  /**
   * Keys whose signed decisions the runs accept (`AGENT_PIPELINE_DECISION_KEYS`, by default the run keys); empty:
   * decisions need no signature.
   */
  decisionKeys: ReadonlyMap<string, KeyObject>;
  /** Whether a worker with run keys runs `--files-from-worker` runs, whose files no signature covers. */
  allowWorkerFiles: boolean;
}

/** A worker that trusts every run and every decision, as before signing existed. */
export const TRUST_EVERYONE: WorkerTrust = { runKeys: new Map(), decisionKeys: new Map(), allowWorkerFiles: true };

/** Reads the worker's key lists. @throws ConfigError naming the variable and the fix */
export function workerTrustFromEnv(env: NodeJS.ProcessEnv): WorkerTrust {
  const runKeys = parsePublicKeys(env[TRUSTED_KEYS_VARIABLE] ?? '', TRUSTED_KEYS_VARIABLE);
  const decisionText = env[DECISION_KEYS_VARIABLE];
  const decisionKeys = decisionText?.trim() ? parsePublicKeys(decisionText, DECISION_KEYS_VARIABLE) : runKeys;
  const allow = (env[ALLOW_WORKER_FILES_VARIABLE] ?? '').trim();
  if (!['', '0', '1'].includes(allow)) throw new ConfigError(`[CONFIG_INVALID] ${ALLOW_WORKER_FILES_VARIABLE}=${allow}: set it to 1 (run --files-from-worker runs) or unset it`);
  // Without trusted keys a worker runs whatever it is given anyway; with them, files no signature covers need a yes.
  return { runKeys, decisionKeys, allowWorkerFiles: runKeys.size === 0 || allow === '1' };
}

/** The signing key material a process may hold, to register for redaction (the encryption keys: codec/encryption-key.ts). */
export function trustSecretValues(env: NodeJS.ProcessEnv): string[] {
  // The same parts as an encryption key's: the whole value, each `<keyId>:<base64>` entry and each key alone.
  return encryptionSecretValues(env[SIGNING_KEY_VARIABLE]);
}
