#!/usr/bin/env node
// Entry point: runs a pipeline worker until SIGINT/SIGTERM, then drains running stages (same as `agent-pipeline worker`).
import { statSync } from 'node:fs';
import module from 'node:module';
import type * as RunWorker from './worker/run-worker.js';

/**
 * The worker bundle's run-worker.js (scripts/bundle-cli.js: our modules and their pure-JavaScript packages in a few
 * files, a start ~0.35 CPU-s shorter), or the compiled module when the bundle is older than this file (`tsc` alone
 * after the last `npm run build`), as bin/agent-pipeline.js chooses for `agent-pipeline worker`.
 */
function runWorkerModule(): string {
  const bundled = new URL('./worker-bundle/run-worker.js', import.meta.url);
  const built = statSync(bundled, { throwIfNoEntry: false });
  return built && built.mtimeMs >= statSync(new URL(import.meta.url)).mtimeMs ? bundled.href : './worker/run-worker.js';
}

// As bin/agent-pipeline.js: Node keeps the compiled code of the modules loaded from here on disk and reuses it.
module.enableCompileCache?.();
const { runWorker } = (await import(runWorkerModule())) as typeof RunWorker;
try {
  await runWorker();
} catch (err) {
  process.stderr.write(`agent-pipeline worker: ${(err as Error).message}\n`);
  process.exitCode = 1;
}
