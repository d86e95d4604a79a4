import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';
import { TemporalUnavailableError } from '../errors.js';

/**
 * The worker's connection to Temporal.
 * @throws TemporalUnavailableError (the command exits 3) naming the address and how to point the worker elsewhere, in
 * place of the SDK's transport error
 */
export async function connectWorker(options: NativeConnectionOptions): Promise<NativeConnection> {
  const address = options.address ?? 'localhost:7233';
  try {
    return await NativeConnection.connect(options);
  } catch (err) {
    const reason = /ConnectionRefused|Connection refused/i.test(String(err)) ? 'connection refused' : String((err as Error).message ?? err).split('\n')[0].slice(0, 300);
    throw new TemporalUnavailableError(
      `[TEMPORAL_UNREACHABLE] the worker cannot reach Temporal at ${address} (${reason}). Start a server (\`agent-pipeline dev\`), or point ` +
        'TEMPORAL_ADDRESS at your cluster (plus TEMPORAL_NAMESPACE, and TEMPORAL_API_KEY or TEMPORAL_TLS_CLIENT_CERT_PATH/KEY_PATH), or choose a profile with TEMPORAL_PROFILE.',
      { cause: err },
    );
  }
}
