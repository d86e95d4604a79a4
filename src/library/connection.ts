import net from 'node:net';
import { Client, Connection } from '@temporalio/client';
import type { PayloadCodec } from '@temporalio/common';
import { loadConfig, loadTemporalConnection } from '../config.js';
import { clientTelemetry } from '../telemetry/client-telemetry.js';
import { clientDataConverter, storePayloadCodecs } from '../codec/data-converter.js';
import { storeFolder } from '../activities/workspace/worker-folder.js';
import { ENCRYPTION_KEY_VARIABLE } from '../codec/encryption-key.js';
import { withCliMessage } from '../errors.js';
import { TemporalUnavailableError } from './errors.js';

/** How to reach Temporal. Anything left out comes from the environment, exactly as the CLI reads it. */
export interface ConnectionOptions {
  /**
   * `host:port` of the Temporal frontend.
   * @default `TEMPORAL_ADDRESS`, else the profile of temporal.toml, else `localhost:7233`
   */
  address?: string;
  /** @default `TEMPORAL_NAMESPACE`, else the profile's, else `default` */
  namespace?: string;
  /** Where to read `TEMPORAL_*` and `AGENT_PIPELINE_*` settings from. @default `process.env` */
  env?: NodeJS.ProcessEnv;
  /** How long to wait for the server before giving up. @unit milliseconds @default 10000 */
  connectTimeoutMs?: number;
  /**
   * Encrypts what the client sends (inputs, decisions, memo, summary) and decrypts what it reads, with AES-256-GCM:
   * `"<keyId>:<base64 of 32 bytes>[,<keyId>:<base64>...]"`, the first key encrypting (see docs/security.md).
   * An empty string turns encryption off. @default `AGENT_PIPELINE_ENCRYPTION_KEY`, else none
   */
  encryptionKey?: string;
}

/** An open connection to Temporal, with the settings it was made from. */
export interface TemporalConnection {
  client: Client;
  namespace: string;
  /** The address connected to, as `host:port`. */
  address: string;
  /** The task queue runs start on (`AGENT_PIPELINE_TASK_QUEUE`, default `agent-pipeline`). */
  taskQueue: string;
  /** Base URL of the Temporal Web UI; empty when unknown. */
  webUiUrl: string;
  close(): Promise<void>;
}

const CLUSTER_SETTINGS =
  '(plus TEMPORAL_NAMESPACE, and TEMPORAL_API_KEY for Temporal Cloud or TEMPORAL_TLS_CLIENT_CERT_PATH/KEY_PATH for mTLS), ' +
  'or choose a profile of your temporal.toml with TEMPORAL_PROFILE.';
/** What to do about an unreachable server, for a caller of the library, and (without its calls and options) at the command line. */
const HOW_TO_CONFIGURE = {
  library: `Start a local server (startDevServer from agent-pipeline/testing, or \`agent-pipeline dev\`), or point TEMPORAL_ADDRESS (the \`address\` option) at your cluster ${CLUSTER_SETTINGS}`,
  cli: `Start a local server (\`agent-pipeline dev\`), or point TEMPORAL_ADDRESS at your cluster ${CLUSTER_SETTINGS}`,
};

/**
 * A client's payload codecs: encryption with `AGENT_PIPELINE_ENCRYPTION_KEY` (or `encryptionKey`, the option), then the
 * claim check, which resolves the payloads workers moved to the store (`AGENT_PIPELINE_STORE`) and, when that variable
 * is set, moves this client's own large payloads (a run's large input) there.
 * @throws ConfigError naming the variable (or option) that is malformed
 */
export function clientCodecsFromEnv(env: NodeJS.ProcessEnv = process.env, encryptionKey?: string): PayloadCodec[] {
  return storePayloadCodecs(env, {
    defaultStoreDir: storeFolder(loadConfig(env).workspacesRoot),
    role: 'client',
    ...(encryptionKey === undefined ? { encryptionKey: env[ENCRYPTION_KEY_VARIABLE] } : { encryptionKey, keySource: 'the encryptionKey option' }),
  });
}

/**
 * Connects with the same settings as the `temporal` CLI: environment variables, the profile file, API key, mTLS.
 * @throws TemporalUnavailableError naming the address tried and how to configure another.
 * @throws ConfigError when the settings cannot be read.
 */
export async function connectTemporal(options: ConnectionOptions = {}): Promise<TemporalConnection> {
  const env = options.env ?? process.env;
  const { connectionOptions, namespace: configured } = loadTemporalConnection(env);
  const namespace = options.namespace ?? configured ?? 'default';
  const target = options.address ?? connectionOptions.address ?? 'localhost:7233';
  const timeoutMs = options.connectTimeoutMs ?? 10_000;
  // A malformed key fails before anything is sent, naming the variable (or option) and the fix, never the key.
  const codecs = clientCodecsFromEnv(env, options.encryptionKey);
  const unreachable = (reason: string, cause?: unknown): TemporalUnavailableError => {
    const problem = `[TEMPORAL_UNREACHABLE] cannot reach Temporal at ${target}${env.TEMPORAL_PROFILE ? ` (profile "${env.TEMPORAL_PROFILE}")` : ''} (${reason}).`;
    return withCliMessage(new TemporalUnavailableError(`${problem} ${HOW_TO_CONFIGURE.library}`, { cause }), `${problem} ${HOW_TO_CONFIGURE.cli}`);
  };
  // A plain TCP connect first: a refused port fails in milliseconds instead of after gRPC's full deadline.
  const refusal = await probeTcp(target, timeoutMs);
  if (refusal) throw unreachable(refusal);
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...connectionOptions, address: target, connectTimeout: timeoutMs });
  } catch (err) {
    throw unreachable((err as Error).message, err);
  }
  // The Web UI link follows the address actually used (the embedded dev server serves it on port + 1000).
  const config = loadConfig({ ...env, TEMPORAL_ADDRESS: target });
  // `StartWorkflow:` and the other client spans when OTEL_EXPORTER_OTLP_ENDPOINT is set; nothing otherwise.
  const telemetry = await clientTelemetry(env);
  return {
    client: new Client({ connection, namespace, interceptors: telemetry.interceptors, dataConverter: clientDataConverter(codecs) }),
    namespace,
    address: target,
    taskQueue: config.taskQueue,
    webUiUrl: config.webUiUrl,
    close: async () => {
      await connection.close();
      await telemetry.shutdown();
    },
  };
}

/** Resolves to why nothing answers at `address` (`host:port`, `[v6]:port`), or undefined when a TCP connection opens. */
async function probeTcp(address: string, timeoutMs: number): Promise<string | undefined> {
  const match = /^\[?([^\]]+?)\]?:(\d+)$/.exec(address);
  if (!match) return `"${address}" is not host:port`;
  const [, host, port] = match;
  return new Promise((resolve) => {
    const socket = net.connect({ host, port: Number(port) });
    const done = (reason: string | undefined): void => {
      socket.destroy();
      resolve(reason);
    };
    socket.setTimeout(timeoutMs, () => done(`no answer within ${timeoutMs / 1000}s`));
    socket.once('connect', () => done(undefined));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code === 'ECONNREFUSED' ? 'connection refused' : (err.code ?? err.message)));
  });
}
