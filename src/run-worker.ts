import Anthropic from '@anthropic-ai/sdk';
import { Client } from '@temporalio/client';
import type { PayloadCodec } from '@temporalio/common';
import { NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadModelCatalog } from './activities/backends/models.js';
import { ExitingAgents } from './activities/backends/claude-cli/agent-exits.js';
import { WarmPool } from './activities/backends/claude-cli/warm-pool.js';
import { createActivities } from './activities/index.js';
import type { AllowedPaths } from './activities/workspace/allowed-paths.js';
import type { PipelineDirs } from './activities/prompt/worker-files.js';
import type { ApiKeyLimiter } from './activities/api-key/key-limiter.js';
import { createWorkerLimiter } from './activities/api-key/worker-limiter.js';
import type { StageBackend } from './activities/backends/stage-backend.js';
import { SecretRegistry } from './activities/secrets.js';
import { sandboxHostChecker, type SandboxHost } from './activities/backends/claude-cli/sandbox-host.js';
import { BACKENDS } from './pipeline/stage-options-schema.js';
import { ConfigError, loadConfig, loadTemporalConnection } from './config.js';
import { stageLogInterceptor } from './logging.js';
import { agentTelemetryEnv } from './telemetry/agent-env.js';
import { NO_TELEMETRY, OTEL_WORKFLOW_INTERCEPTORS } from './telemetry/worker-telemetry.js';
import { workerOptionsFromEnv, type WorkerEnvOptions } from './worker-env.js';
import type { StartWorkerOptions } from './worker-options.js';
import { checkpointsFromEnv, sweepStoreWhileRunning, workerCodecs } from './worker-store.js';
import { workerTrustFromEnv } from './trust/worker-trust.js';
import { clientDataConverter, encryptionCodecOf, workerDataConverter } from './codec/data-converter.js';
import { encryptionSecretValues } from './codec/encryption-key.js';
import type { ObjectStore } from './store/object-store.js';
import { storeSecretValues } from './store/store-settings.js';
import { deploymentFromEnv, pinnedDeploymentOptions } from './worker-deployment.js';
import { createOwnerWorkers, ownerClaim, ownerIdFor, runWithOwnerWorkers } from './owner-workers.js';

/** The workflow bundle `npm run build` writes next to this file; without it the worker bundles at start. */
const PREBUILT_BUNDLE = fileURLToPath(new URL('./workflow-bundle.js', import.meta.url));
/** The same with Temporal's OpenTelemetry workflow interceptors, loaded when tracing is on. */
const PREBUILT_TRACED_BUNDLE = fileURLToPath(new URL('./workflow-bundle-traced.js', import.meta.url));
/** Both again, built with the failure converter of encrypting workers (see codec/encoded-failure-converter.ts). */
const PREBUILT_ENCRYPTED_BUNDLE = fileURLToPath(new URL('./workflow-bundle-encrypted.js', import.meta.url));
const PREBUILT_ENCRYPTED_TRACED_BUNDLE = fileURLToPath(new URL('./workflow-bundle-encrypted-traced.js', import.meta.url));

/** The prebuilt workflow bundle for a worker that traces or not, encrypts or not. */
export function prebuiltBundle(traced: boolean, encrypted: boolean): string {
  if (encrypted) return traced ? PREBUILT_ENCRYPTED_TRACED_BUNDLE : PREBUILT_ENCRYPTED_BUNDLE;
  return traced ? PREBUILT_TRACED_BUNDLE : PREBUILT_BUNDLE;
}
// Running from source (tests), the workflows are TypeScript; Temporal's bundler compiles them.
const WORKFLOWS_PATH = [
  fileURLToPath(new URL('./workflows/index.js', import.meta.url)),
  fileURLToPath(new URL('./workflows/index.ts', import.meta.url)),
].find((file) => existsSync(file));

/** Connects to Temporal and creates a worker for the pipeline workflow and its activities. */
export async function createPipelineWorker(options: StartWorkerOptions = {}): Promise<Worker> {
  return (await createWorkerWithResources(options)).worker;
}

/**
 * The objects a worker makes once and hands to its activities through `createActivities` (Temporal's
 * dependency-injection pattern), which outlive a stage attempt and are released when the worker stops.
 */
export interface WorkerResources {
  secrets: SecretRegistry;
  /** Agents started ahead of time for the stages to come; none when warm start is off. */
  warmPool?: WarmPool;
  /** Agents whose stages completed on their result, still shutting down. */
  exitingAgents: ExitingAgents;
  /** What this host offers Claude Code's sandbox: checked when first asked, a host that cannot checked again within seconds. */
  sandboxHost: () => Promise<SandboxHost>;
  /** The shared limits of the worker's API key; none without a key. */
  apiKeyLimiter?: ApiKeyLimiter;
}

function createWorkerResources(settings: WorkerEnvOptions, env: NodeJS.ProcessEnv, encryptionKey: string | undefined, sandboxRecheckMs?: number): WorkerResources {
  const { enabled, ttlMs } = settings.prewarm;
  return {
    // The encryption keys and the store's keys are redacted like any credential, though no agent is ever given them.
    secrets: new SecretRegistry([...encryptionSecretValues(encryptionKey), ...storeSecretValues(env)]),
    // Waiting agents count against the worker's stage limit, the one it was given or read from its environment.
    warmPool: enabled ? new WarmPool({ ttlMs, killGraceMs: settings.killGraceMs, limit: settings.maxConcurrentStages }) : undefined,
    exitingAgents: new ExitingAgents(),
    sandboxHost: sandboxHostChecker(env, { recheckMs: sandboxRecheckMs }),
  };
}

/** Stops what the worker's resources still hold (after `worker.run()` resolved). */
export async function releaseWorkerResources(resources: WorkerResources): Promise<void> {
  resources.apiKeyLimiter?.stop();
  // Agents started ahead of time for stages this worker will not run now.
  await resources.warmPool?.stopAll();
  // Agents whose stages completed on their result, still shutting down.
  await resources.exitingAgents.allExited();
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

function checkBackendNames(backends: Record<string, StageBackend> | undefined): void {
  const taken = Object.keys(backends ?? {}).filter((name) => (BACKENDS as readonly string[]).includes(name));
  if (taken.length > 0) throw new ConfigError(`[CONFIG_INVALID] backends: ${taken.join(', ')} is built in; give your backend another name`);
}

export async function createWorkerWithResources(options: StartWorkerOptions): Promise<{ worker: Worker; resources: WorkerResources }> {
  const env = options.env ?? process.env;
  const config = loadConfig(env);
  const fromEnv = workerOptionsFromEnv(env);
  const settings = { ...fromEnv, maxConcurrentStages: options.maxConcurrentStages ?? fromEnv.maxConcurrentStages, sandbox: options.sandbox ?? fromEnv.sandbox };
  const { connectionOptions, namespace } = loadTemporalConnection(env);
  checkBackendNames(options.backends);
  const workspacesRoot = options.workspacesRoot ? path.resolve(options.workspacesRoot) : config.workspacesRoot;
  const { codecs, store, encryptionKey } = await workerCodecs(env, workspacesRoot, options.encryptionKey);
  const connection = await NativeConnection.connect({ ...connectionOptions, address: options.address ?? connectionOptions.address });
  const apiKey = env.ANTHROPIC_API_KEY;
  const resources = createWorkerResources(settings, env, encryptionKey, options.sandboxRecheckMs);
  const workerNamespace = options.namespace ?? namespace ?? 'default';
  const taskQueue = options.taskQueue ?? config.taskQueue;
  resources.apiKeyLimiter = apiKey
    ? createWorkerLimiter({
        apiKey,
        limits: options.apiKeyLimits ?? settings.apiKeyLimits,
        // Its signals, updates and memo must be encoded as the worker's own payloads are.
        client: new Client({ connection, namespace: workerNamespace, dataConverter: clientDataConverter(codecs) }),
        taskQueue,
        warn: (message) => Runtime.instance().logger.warn(message),
      })
    : undefined;
  const owner = ownerClaim(taskQueue, options.workerOptions?.identity, settings.ownerTimeoutMs, await ownerIdFor(workspacesRoot, env));
  const activities = createActivities({
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
  const telemetry = options.telemetry ?? NO_TELEMETRY;
  await telemetry.serve(connection, workerNamespace);
  const traced = Boolean(telemetry.tracing);
  const encrypted = encryptionCodecOf(codecs) !== undefined;
  const prebuilt = prebuiltBundle(traced, encrypted);
  const bundle = options.workflowBundlePath ?? (existsSync(prebuilt) ? prebuilt : undefined);
  // Set AGENT_PIPELINE_DEPLOYMENT to pin every run to this worker's build (Worker Deployment Versioning).
  const deployment = deploymentFromEnv(env, bundle);
  const workflowSource: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> = bundle
    ? { workflowBundle: { codePath: bundle } }
    : { workflowsPath: WORKFLOWS_PATH };
  const { activityInterceptors, sinks } = telemetry.workerOptions();
  const shared = sharedWorkerOptions({ connection, namespace: workerNamespace, activities, settings, codecs, deployment, options, activityInterceptors });
  const worker = await Worker.create({
    ...shared,
    taskQueue,
    ...workflowSource,
    maxConcurrentWorkflowTaskExecutions: settings.maxConcurrentWorkflowTasks,
    stickyQueueScheduleToStartTimeout: settings.stickyTimeoutMs,
    interceptors: {
      ...shared.interceptors,
      // Only used when bundling at start; a prebuilt traced bundle already contains them.
      workflowModules: traced && !bundle ? [OTEL_WORKFLOW_INTERCEPTORS] : undefined,
    },
    sinks,
    ...options.workerOptions,
  });
  // The runs this worker claims send their activities to its own queues (one owner per run).
  runWithOwnerWorkers(worker, await createOwnerWorkers(owner, { ...shared, identity: worker.options.identity }));
  // The objects of runs Temporal no longer keeps go from the store, whichever worker wrote them.
  if (settings.storeSweepMs !== undefined) sweepStoreWhileRunning(worker, store, new Client({ connection, namespace: workerNamespace, dataConverter: clientDataConverter(codecs) }), settings.storeSweepMs);
  // One read before the worker polls, so that a worker started during a key's pause already keeps to it.
  await resources.apiKeyLimiter?.start(() => worker.getState() !== 'STOPPED' && worker.getState() !== 'FAILED');
  return { worker, resources };
}

/** The options the Workers of the shared queue and of the owner's queues share: the activities and how they run. */
function sharedWorkerOptions(o: {
  connection: NativeConnection;
  namespace: string;
  activities: ReturnType<typeof createActivities>;
  settings: WorkerEnvOptions;
  codecs: PayloadCodec[];
  deployment: ReturnType<typeof deploymentFromEnv>;
  options: StartWorkerOptions;
  activityInterceptors: NonNullable<NonNullable<WorkerOptions['interceptors']>['activity']>;
}) {
  const { connection, namespace, activities, settings, codecs, deployment, options, activityInterceptors } = o;
  return {
    connection,
    namespace,
    activities,
    maxConcurrentActivityTaskExecutions: settings.maxConcurrentStages,
    // Each waiting poll holds a stage slot. The SDK's default (as many polls as slots, up to 10) left no slot free, so
    // the server could never hand the next stage back eagerly with the workflow task that schedules it; stages are
    // minutes long, so two polls keep up with any arrival rate.
    activityTaskPollerBehavior: { type: 'simple-maximum', maximum: Math.min(2, settings.maxConcurrentStages) },
    // On SIGTERM running stages get this long to finish; then they are cancelled (the agent is stopped, partial work
    // stays in the shared workspace) and Temporal retries them on another worker, which resumes the agent's session.
    shutdownGraceTime: settings.shutdownGraceMs,
    // A stage that ignores its cancellation must not keep the container from stopping.
    shutdownForceTime: settings.shutdownGraceMs + settings.shutdownForceAfterGraceMs,
    // Cancellation reaches an activity only in the answer to a heartbeat, and heartbeats are throttled to 80% of the
    // heartbeat timeout (minutes for agents): a cap of a few seconds makes `cancel` stop an agent promptly.
    maxHeartbeatThrottleInterval: '5s',
    // Encrypted payloads and failures when a key is set; the prebuilt bundle then has the same failure converter.
    dataConverter: workerDataConverter(codecs),
    ...(deployment ? { workerDeploymentOptions: pinnedDeploymentOptions(deployment) } : {}),
    ...options.workerOptions,
    interceptors: { activity: [...activityInterceptors, stageLogInterceptor], ...options.workerOptions?.interceptors },
  } satisfies Partial<WorkerOptions>;
}
