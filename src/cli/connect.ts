import net from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { loadTemporalConnection } from '../config.js';
import { clientTelemetry } from '../telemetry/client-telemetry.js';
import { TemporalUnreachableError, toUserError } from './errors.js';

export interface ConnectedClient {
  client: Client;
  namespace: string;
  /** The address connected to, as `host:port`. */
  address: string;
  close(): Promise<void>;
}

/** How long to wait for the server to answer before giving up. @unit milliseconds */
const CONNECT_TIMEOUT_MS = 10_000;

const HOW_TO_CONFIGURE =
  'Start a local server with `agent-pipeline dev`, or point TEMPORAL_ADDRESS at your cluster ' +
  '(plus TEMPORAL_NAMESPACE, and TEMPORAL_API_KEY for Temporal Cloud or TEMPORAL_TLS_CLIENT_CERT_PATH/KEY_PATH for mTLS), ' +
  'or choose a profile of your temporal.toml with TEMPORAL_PROFILE.';

/**
 * Connects with the same settings as the `temporal` CLI: environment variables, the profile file, API key, mTLS.
 * @throws TemporalUnreachableError naming the address tried and how to configure another.
 */
export async function connectClient(address?: string): Promise<ConnectedClient> {
  const { connectionOptions, namespace = 'default' } = loadTemporalConnection();
  const target = address ?? connectionOptions.address ?? 'localhost:7233';
  const unreachable = (reason: string, cause?: unknown): TemporalUnreachableError =>
    new TemporalUnreachableError(
      `[TEMPORAL_UNREACHABLE] cannot reach Temporal at ${target}${process.env.TEMPORAL_PROFILE ? ` (profile "${process.env.TEMPORAL_PROFILE}")` : ''} (${reason}). ${HOW_TO_CONFIGURE}`,
      { cause },
    );
  // A plain TCP connect first: a refused port fails in milliseconds instead of after gRPC's full deadline.
  const refusal = await probeTcp(target, CONNECT_TIMEOUT_MS);
  if (refusal) throw unreachable(refusal);
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...connectionOptions, address: target, connectTimeout: CONNECT_TIMEOUT_MS });
  } catch (err) {
    throw unreachable((err as Error).message, err);
  }
  const telemetry = clientTelemetry();
  const client = new Client({ connection, namespace, interceptors: telemetry.interceptors });
  const close = async (): Promise<void> => {
    await connection.close();
    await telemetry.shutdown();
  };
  return { client, namespace, address: target, close };
}

/**
 * Runs `fn` with a connected client and closes it afterwards; Temporal errors become user errors
 * (unknown run, rejected request, lost connection) with the right exit code.
 */
export async function withClient<T>(fn: (connected: ConnectedClient) => Promise<T>, address?: string): Promise<T> {
  const connected = await connectClient(address);
  try {
    return await fn(connected);
  } catch (err) {
    throw toUserError(err, connected.address);
  } finally {
    await connected.close();
  }
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
