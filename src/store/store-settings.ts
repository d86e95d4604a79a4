import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../errors.js';
import { toMilliseconds } from '../pipeline/duration.js';
import { checkStoreKey } from './object-store.js';

/*
 * The store's settings, read from the environment of workers and clients alike (docs/configuration.md#object-store).
 * `AGENT_PIPELINE_STORE` says where: `file:///path` or `s3://bucket/prefix`; unset, the worker's own folder under the
 * workspaces root. The `s3://` kind has its own settings; credentials in them are worker secrets (never an agent's).
 */

export const STORE_VARIABLE = 'AGENT_PIPELINE_STORE';
export const STORE_ENDPOINT_VARIABLE = 'AGENT_PIPELINE_STORE_ENDPOINT';
export const STORE_REGION_VARIABLE = 'AGENT_PIPELINE_STORE_REGION';
export const STORE_PATH_STYLE_VARIABLE = 'AGENT_PIPELINE_STORE_PATH_STYLE';
export const STORE_ACCESS_KEY_VARIABLE = 'AGENT_PIPELINE_STORE_ACCESS_KEY_ID';
export const STORE_SECRET_KEY_VARIABLE = 'AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY';
export const STORE_WAIT_VARIABLE = 'AGENT_PIPELINE_STORE_WAIT';

/** Every store setting: none of them is ever given to an agent or a command. */
export const STORE_VARIABLES = [
  STORE_VARIABLE, STORE_ENDPOINT_VARIABLE, STORE_REGION_VARIABLE, STORE_PATH_STYLE_VARIABLE, STORE_ACCESS_KEY_VARIABLE, STORE_SECRET_KEY_VARIABLE, STORE_WAIT_VARIABLE,
] as const;

/** How long a worker waits for an `s3://` store that does not answer before an operation fails (waiting-store.ts). */
export const DEFAULT_WORKER_STORE_WAIT = '5m';

/** The region when none is set: what S3-compatible stores that ignore regions accept. */
export const DEFAULT_STORE_REGION = 'us-east-1';

/** Where the store is. */
export type StoreSettings =
  | { kind: 'file'; dir: string; explicit: boolean }
  | { kind: 's3'; bucket: string; prefix: string; endpoint?: string; region: string; pathStyle: boolean; credentials?: { accessKeyId: string; secretAccessKey: string } };

const FORMS = `file:///absolute/path or s3://bucket/prefix`;

const invalid = (variable: string, problem: string, fix: string): ConfigError => new ConfigError(`[CONFIG_INVALID] ${variable}: ${problem}; ${fix}`);

/**
 * The store settings of `env`. `defaultDir` is the folder of the default file store (the worker's own folder under
 * the workspaces root).
 * @throws ConfigError `CONFIG_INVALID` naming the variable, its bad value (never a secret) and the fix
 */
export function storeSettingsFromEnv(env: NodeJS.ProcessEnv, defaultDir: string): StoreSettings {
  const value = env[STORE_VARIABLE]?.trim();
  if (!value) return { kind: 'file', dir: path.resolve(defaultDir), explicit: false };
  if (value.startsWith('file:')) return { kind: 'file', dir: fileStoreDir(value), explicit: true };
  if (value.startsWith('s3://')) return s3Settings(value, env);
  throw invalid(STORE_VARIABLE, `"${value.slice(0, 200)}" is not a store URL`, `set it to ${FORMS}, or leave it unset for a folder under AGENT_PIPELINE_WORKSPACES`);
}

function fileStoreDir(value: string): string {
  let dir: string;
  try {
    dir = fileURLToPath(value);
  } catch {
    throw invalid(STORE_VARIABLE, `"${value.slice(0, 200)}" is not a file URL with an absolute path`, 'write it as file:///absolute/path (three slashes)');
  }
  if (dir === path.parse(dir).root) throw invalid(STORE_VARIABLE, 'the store cannot be the root folder', 'give a folder of its own, e.g. file:///var/lib/agent-pipeline/store');
  return path.resolve(dir);
}

function s3Settings(value: string, env: NodeJS.ProcessEnv): StoreSettings {
  const rest = value.slice('s3://'.length);
  const slash = rest.indexOf('/');
  const bucket = slash < 0 ? rest : rest.slice(0, slash);
  const prefix = slash < 0 ? '' : rest.slice(slash + 1).replace(/\/+$/, '');
  // S3's bucket naming rules: 3 to 63 of lower-case letters, digits, dots and hyphens.
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    throw invalid(STORE_VARIABLE, `"${bucket.slice(0, 80)}" is not a bucket name (3 to 63 of a-z 0-9 . -)`, 'write it as s3://bucket/prefix');
  }
  if (prefix) {
    try {
      checkStoreKey(prefix);
    } catch {
      throw invalid(STORE_VARIABLE, `the prefix "${prefix.slice(0, 200)}" is not made of A-Z a-z 0-9 . _ - separated by /`, 'write it as s3://bucket/some/prefix');
    }
  }
  return { kind: 's3', bucket, prefix, ...endpointOf(env), region: env[STORE_REGION_VARIABLE]?.trim() || DEFAULT_STORE_REGION, pathStyle: pathStyleOf(env), ...credentialsOf(env) };
}

function endpointOf(env: NodeJS.ProcessEnv): { endpoint?: string } {
  const value = env[STORE_ENDPOINT_VARIABLE]?.trim();
  if (!value) return {};
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid(STORE_ENDPOINT_VARIABLE, `"${value.slice(0, 200)}" is not a URL`, 'set it to the service URL, e.g. http://127.0.0.1:7070 or https://s3.example.com');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid(STORE_ENDPOINT_VARIABLE, `"${url.protocol}" is not http: or https:`, 'set it to an http:// or https:// URL');
  // Credentials go in their own variables, which are redacted and never logged; a URL is printed in messages.
  if (url.username || url.password) throw invalid(STORE_ENDPOINT_VARIABLE, 'the URL holds credentials', `put them in ${STORE_ACCESS_KEY_VARIABLE} and ${STORE_SECRET_KEY_VARIABLE} instead`);
  return { endpoint: url.href.replace(/\/$/, '') };
}

function pathStyleOf(env: NodeJS.ProcessEnv): boolean {
  const value = env[STORE_PATH_STYLE_VARIABLE]?.trim() ?? '';
  if (value === '' || value === '0') return false;
  if (value === '1') return true;
  throw invalid(STORE_PATH_STYLE_VARIABLE, `"${value.slice(0, 40)}" is not 1 or 0`, 'set it to 1 for stores addressed as endpoint/bucket (MinIO, versitygw), or leave it unset');
}

function credentialsOf(env: NodeJS.ProcessEnv): { credentials?: { accessKeyId: string; secretAccessKey: string } } {
  const accessKeyId = env[STORE_ACCESS_KEY_VARIABLE]?.trim();
  const secretAccessKey = env[STORE_SECRET_KEY_VARIABLE]?.trim();
  // Neither: the SDK's default chain (AWS_* variables, ~/.aws, instance or pod roles).
  if (!accessKeyId && !secretAccessKey) return {};
  if (!accessKeyId) throw invalid(STORE_ACCESS_KEY_VARIABLE, `is not set while ${STORE_SECRET_KEY_VARIABLE} is`, 'set both, or neither to use the AWS default credential chain');
  if (!secretAccessKey) throw invalid(STORE_SECRET_KEY_VARIABLE, `is not set while ${STORE_ACCESS_KEY_VARIABLE} is`, 'set both, or neither to use the AWS default credential chain');
  return { credentials: { accessKeyId, secretAccessKey } };
}

/**
 * How long one operation waits out a store outage: `AGENT_PIPELINE_STORE_WAIT` (`0` for not at all), else `fallback`.
 * @unit milliseconds
 * @throws ConfigError `CONFIG_INVALID` naming the variable and its value
 */
export function storeWaitMs(env: NodeJS.ProcessEnv, fallback: string): number {
  const value = env[STORE_WAIT_VARIABLE]?.trim() || fallback;
  if (value === '0') return 0;
  try {
    return toMilliseconds(value);
  } catch {
    throw invalid(STORE_WAIT_VARIABLE, `"${value.slice(0, 40)}" is not a duration`, 'write it like 30s, 5m or 1h, or 0 to fail at once');
  }
}

/** What to redact of the store settings: the secret key, and the access key id (it names the account). */
export function storeSecretValues(env: NodeJS.ProcessEnv): string[] {
  return [env[STORE_ACCESS_KEY_VARIABLE], env[STORE_SECRET_KEY_VARIABLE]].map((v) => v?.trim()).filter((v): v is string => !!v);
}
