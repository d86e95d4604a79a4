#!/usr/bin/env node
/**
 * A worker that bundles the workflow code with webpack as it starts, instead of loading the prebuilt
 * dist/workflow-bundle.js: the worker-start benchmark's point of comparison. Configured from the
 * environment like `node dist/worker.js`.
 */
import { fileURLToPath } from 'node:url';
import { createPipelineWorker } from '../src/worker/create-worker.js';

// This file runs as dist/bench/bench/worker-without-bundle.js; the workflows are the regular build's, dist/workflows/.
const workflowsPath = fileURLToPath(new URL('../../workflows/index.js', import.meta.url));
const worker = await createPipelineWorker({ workerOptions: { workflowBundle: undefined, workflowsPath } });
process.stderr.write(`agent-pipeline worker polling task queue "${worker.options.taskQueue}" (workflows bundled at start)\n`);
await worker.run();
