import type { Client } from '@temporalio/client';
import type { PipelineClient } from '../library/pipeline-client.js';

export interface ConnectedClient {
  /** The library client every command goes through (start, status, decisions, list, schedules). */
  pipeline: PipelineClient;
  client: Client;
  namespace: string;
  /** The address connected to, as `host:port`. */
  address: string;
  close(): Promise<void>;
}

/**
 * Connects with the same settings as the `temporal` CLI: environment variables, the profile file, API key, mTLS.
 * The library client, and with it the Temporal client and gRPC, is loaded here rather than when the command line
 * starts: `--help`, `validate` and usage errors never need it (docs/performance.md, "Command start-up").
 * @throws TemporalUnavailableError naming the address tried and how to configure another.
 */
export async function connectClient(address?: string): Promise<ConnectedClient> {
  const { PipelineClient } = await import('../library/pipeline-client.js');
  const pipeline = await PipelineClient.connect({ address });
  return { pipeline, client: pipeline.temporal, namespace: pipeline.namespace, address: pipeline.address, close: () => pipeline.close() };
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
    const { toLibraryError } = await import('../library/temporal-errors.js');
    throw toLibraryError(err, connected.address);
  } finally {
    await connected.close();
  }
}
