import Anthropic from '@anthropic-ai/sdk';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadModelCatalog } from './activities/backends/models.js';
import { createActivities } from './activities/index.js';
import { loadConfig } from './config.js';

/** Options for a worker; everything else comes from the environment (see the README). */
export interface StartWorkerOptions {
  env?: NodeJS.ProcessEnv;
  /** Overrides `TEMPORAL_ADDRESS`, e.g. for the embedded dev server. */
  address?: string;
  /** Overrides `AGENT_PIPELINE_TASK_QUEUE`; tests give each file its own queue. */
  taskQueue?: string;
  /** A prebuilt workflow bundle to load instead of the one next to this file. */
  workflowBundlePath?: string;
  /** Extra worker options, e.g. `maxCachedWorkflows: 0` in tests so every task replays. */
  workerOptions?: Partial<WorkerOptions>;
}

/** The workflow bundle `npm run build` writes next to this file; without it the worker bundles at start. */
const PREBUILT_BUNDLE = fileURLToPath(new URL('./workflow-bundle.js', import.meta.url));
// Running from source (tests), the workflows are TypeScript; Temporal's bundler compiles them.
const WORKFLOWS_PATH = [
  fileURLToPath(new URL('./workflows/index.js', import.meta.url)),
  fileURLToPath(new URL('./workflows/index.ts', import.meta.url)),
].find((file) => existsSync(file));

/** Connects to Temporal and creates a worker for the pipeline workflow and its activities. */
export async function createPipelineWorker(options: StartWorkerOptions = {}): Promise<Worker> {
  const env = options.env ?? process.env;
  const config = loadConfig(env);
  const { connectionOptions, namespace } = loadClientConnectConfig({ overrideEnvVars: env as Record<string, string> });
  const connection = await NativeConnection.connect({ ...connectionOptions, address: options.address ?? connectionOptions.address });
  const apiKey = env.ANTHROPIC_API_KEY;
  const activities = createActivities({
    workspacesRoot: config.workspacesRoot,
    cli: { env },
    api: {
      // Temporal owns retries; the SDK would otherwise retry 429/5xx twice on its own, invisibly.
      client: apiKey ? new Anthropic({ apiKey, baseURL: env.ANTHROPIC_BASE_URL || undefined, maxRetries: 0 }) : undefined,
      models: loadModelCatalog(env),
    },
  });
  const bundle = options.workflowBundlePath ?? (existsSync(PREBUILT_BUNDLE) ? PREBUILT_BUNDLE : undefined);
  const workflowSource: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> = bundle
    ? { workflowBundle: { codePath: bundle } }
    : { workflowsPath: WORKFLOWS_PATH };
  return Worker.create({
    connection,
    namespace: namespace ?? 'default',
    taskQueue: options.taskQueue ?? config.taskQueue,
    ...workflowSource,
    activities,
    maxConcurrentActivityTaskExecutions: Number(env.AGENT_PIPELINE_MAX_CONCURRENT_STAGES || 8),
    // Running stages get this long to finish on SIGTERM; after it they are cancelled and resume on another worker.
    shutdownGraceTime: env.AGENT_PIPELINE_SHUTDOWN_GRACE || '30s',
    ...options.workerOptions,
  });
}
