import { Client } from '@temporalio/client';
import type { PayloadCodec } from '@temporalio/common';
import { execa } from 'execa';
import path from 'node:path';
import { clientDataConverter, storePayloadCodecs } from '../../src/codec/data-converter.js';
import { findVersitygw } from '../../src/dev/versitygw.js';
import { startVersitygw } from '../../test/helpers/versitygw.js';
import { PROJECT_ROOT, type BenchStack } from './stack.js';
import { elapsedMs } from './stats.js';

/*
 * An object store for the benchmarks of issue 29: versitygw (a real S3-compatible server, the one the tests use) where
 * it is built (`npm run provision-versitygw`, or .ci/run), else a folder store, which the results then name.
 */

export interface BenchStore {
  /** `s3 (versitygw)` or `file`, for the results. */
  kind: string;
  /** The store settings of workers and clients. */
  env: Record<string, string>;
  /** The codecs of a client with those settings (it claims large payloads into the store and resolves references). */
  codecs: PayloadCodec[];
  /** A client of the bench's Temporal server with those codecs. */
  client: Client;
  stop(): Promise<void>;
}

export async function startBenchStore(stack: BenchStack, log: (line: string) => void): Promise<BenchStore> {
  const folder = await stack.folder('store');
  const binary = (await findVersitygw()).path;
  let env: Record<string, string> = { AGENT_PIPELINE_STORE: `file://${folder}` };
  let stop = async (): Promise<void> => {};
  if (binary) {
    const server = await startVersitygw(binary);
    await server.createBucket('bench');
    env = server.storeEnv('bench', 'agent-pipeline');
    stop = () => server.stop();
  } else {
    log('versitygw is not built here (npm run provision-versitygw): the store is a folder');
  }
  const codecs = storePayloadCodecs(env, { defaultStoreDir: folder, role: 'client' });
  const client = new Client({ connection: stack.client.connection, dataConverter: clientDataConverter(codecs) });
  return { kind: binary ? 's3 (versitygw)' : 'file', env, codecs, client, stop };
}

/** What one `agent-pipeline` command did. */
export interface CliOutcome {
  exitCode: number;
  stdout: string;
  stderr: string;
  /** @unit milliseconds */
  ms: number;
}

/** Runs the project's CLI (`bin/agent-pipeline.js`) with `env` (a worker's environment: server, queue, store). */
export async function runCli(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 300_000): Promise<CliOutcome> {
  const startNs = process.hrtime.bigint();
  const result = await execa(process.execPath, [path.join(PROJECT_ROOT, 'bin', 'agent-pipeline.js'), ...args], {
    env,
    extendEnv: false,
    reject: false,
    timeout: timeoutMs,
    maxBuffer: 256 * 1024 * 1024,
  });
  return { exitCode: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr), ms: elapsedMs(startNs) };
}
