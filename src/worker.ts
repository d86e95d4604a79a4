#!/usr/bin/env node
// Entry point: runs a pipeline worker until SIGINT/SIGTERM, then drains running stages.
import { createPipelineWorker } from './run-worker.js';

const worker = await createPipelineWorker();
console.error(`agent-pipeline worker polling task queue "${worker.options.taskQueue}"`);
await worker.run();
