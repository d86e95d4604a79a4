import Anthropic from '@anthropic-ai/sdk';
import { loadModelCatalog } from '../activities/backends/models.js';
import { createActivities } from '../activities/index.js';
import type { PipelineDirs } from '../activities/prompt/worker-files.js';
import type { AllowedPaths } from '../activities/workspace/allowed-paths.js';
import type { RunOwnerClaim } from '../contracts/run-owner.js';
import type { ObjectStore } from '../store/object-store.js';
import { agentTelemetryEnv } from '../telemetry/agent-env.js';
import { workerTrustFromEnv } from '../trust/worker-trust.js';
import type { WorkerEnvOptions } from './env.js';
import type { StartWorkerOptions } from './options.js';
import type { WorkerResources } from './resources.js';
import { checkpointsFromEnv } from './store.js';

/** What a worker's activities are made from: its options and settings, its store, its claim on runs, its resources. */
export interface WorkerActivitiesInput {
  options: StartWorkerOptions;
  settings: WorkerEnvOptions;
  env: NodeJS.ProcessEnv;
  apiKey: string | undefined;
  workspacesRoot: string;
  store: ObjectStore;
  owner: RunOwnerClaim;
  resources: WorkerResources;
}

/**
 * The worker's activities (`createActivities`, Temporal's dependency-injection pattern): what every stage attempt is
 * given, from the worker's settings and the objects it made once.
 */
export function workerActivities(input: WorkerActivitiesInput): ReturnType<typeof createActivities> {
  const { options, settings, env, apiKey, workspacesRoot, store, owner, resources } = input;
  return createActivities({
    store,
    owner: { claim: owner, slots: settings.maxConcurrentStages },
    extraBackends: options.backends,
    ...hostFolders(options, settings, workspacesRoot, env, store),
    secrets: resources.secrets,
    trust: workerTrustFromEnv(env),
    leasePollMs: options.leasePollMs,
    cli: {
      env,
      killGraceMs: settings.killGraceMs,
      warmPool: resources.warmPool,
      exitingAgents: resources.exitingAgents,
      agentTelemetryEnv: (tags) => agentTelemetryEnv(env, tags),
      sandbox: settings.sandbox,
      sandboxHost: resources.sandboxHost,
    },
    api: {
      // Temporal owns retries; the SDK would otherwise retry 429/5xx twice on its own, invisibly.
      client: apiKey ? new Anthropic({ apiKey, baseURL: env.ANTHROPIC_BASE_URL || undefined, maxRetries: 0 }) : undefined,
      models: loadModelCatalog(env),
      limiter: resources.apiKeyLimiter,
    },
  });
}

/**
 * A worker shared by several people lends none of its host's folders to runs, and reads no pipeline from its own disk
 * for runs that carry none, unless its operator says which.
 */
function hostFolders(options: StartWorkerOptions, settings: WorkerEnvOptions, workspacesRoot: string, env: NodeJS.ProcessEnv, store: ObjectStore) {
  const folders: { allowedPaths: AllowedPaths; pipelineDirs: PipelineDirs } = { allowedPaths: options.allowedPaths ?? settings.allowedPaths ?? [], pipelineDirs: options.pipelineDirs ?? settings.pipelineDirs ?? [] };
  // The runs' workspaces, and the checkpoints that carry them to another host.
  return { ...folders, workspacesRoot, checkpoints: checkpointsFromEnv(env, store) };
}
