import { Client, Connection } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import { TemporalUnreachableError } from './errors.js';

export interface ConnectedClient {
  client: Client;
  namespace: string;
  address: string;
  close(): Promise<void>;
}

/** Connects with the same settings as `temporal` itself: env vars, profile file, API key, mTLS. */
export async function connectClient(address?: string): Promise<ConnectedClient> {
  const { connectionOptions, namespace = 'default' } = loadClientConnectConfig();
  const target = address ?? connectionOptions.address ?? 'localhost:7233';
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...connectionOptions, address: target, connectTimeout: '10s' });
  } catch (err) {
    throw new TemporalUnreachableError(
      `[TEMPORAL_UNREACHABLE] cannot reach Temporal at ${target} (${(err as Error).message}). ` +
        'Start a local server with `agent-pipeline dev`, or point TEMPORAL_ADDRESS (and TEMPORAL_NAMESPACE, TEMPORAL_API_KEY for Temporal Cloud) at your cluster.',
    );
  }
  return { client: new Client({ connection, namespace }), namespace, address: target, close: () => connection.close() };
}
