import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startDevServer } from '../../src/dev/dev-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** gRPC address (`127.0.0.1:PORT`) of the dev server shared by the whole test run; namespace `default`. */
    temporalAddress: string;
  }
}

/**
 * Starts one headless, in-memory Temporal dev server on a free port for the whole test run and stops it at the
 * end. A first run may build the Temporal CLI first (minutes); `.ci/run` does that step up front.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const logDir = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-test-temporal-'));
  const server = await startDevServer({ port: 'auto', headless: true, dbFile: null, logFile: path.join(logDir, 'temporal-server.log') });
  project.provide('temporalAddress', server.address);
  return async () => {
    await server.stop();
    await rm(logDir, { recursive: true, force: true });
  };
}
