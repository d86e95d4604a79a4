#!/usr/bin/env node
// Entry point: runs a pipeline worker until SIGINT/SIGTERM, then drains running stages (same as `agent-pipeline worker`).
import { runWorker } from './worker/run-worker.js';

try {
  await runWorker();
} catch (err) {
  process.stderr.write(`agent-pipeline worker: ${(err as Error).message}\n`);
  process.exitCode = 1;
}
