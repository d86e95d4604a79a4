import type { Client } from '@temporalio/client';
import { PipelineClient } from '../library/pipeline-client.js';
import { toLibraryError } from '../library/errors.js';

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
 * @throws TemporalUnavailableError naming the address tried and how to configure another.
 */
export async function connectClient(address?: string): Promise<ConnectedClient> {
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
    throw toLibraryError(err, connected.address);
  } finally {
    await connected.close();
  }
}
