import Anthropic from '@anthropic-ai/sdk';
import { Client } from '@temporalio/client';
import { NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { rm, stat, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { loadModelCatalog } from './activities/backends/models.js';
import { ExitingAgents } from './activities/backends/claude-cli/agent-exits.js';
import { WarmPool } from './activities/backends/claude-cli/warm-pool.js';
import { createActivities } from './activities/index.js';
import type { AllowedPaths } from './activities/workspace/allowed-paths.js';
import type { PipelineDirs } from './activities/prompt/worker-files.js';
import type { ApiKeyLimiter, ApiKeyLimits } from './activities/api-key/key-limiter.js';
import { createWorkerLimiter } from './activities/api-key/worker-limiter.js';
import type { StageBackend } from './activities/backends/stage-backend.js';
import { SecretRegistry } from './activities/secrets.js';
import { SANDBOX_INSTALL, sandboxHostChecker, type SandboxHost } from './activities/backends/claude-cli/sandbox-host.js';
import { describeSandboxMode, SANDBOX_VARIABLE, type SandboxMode } from './activities/backends/claude-cli/sandbox-mode.js';
import { BACKENDS } from './pipeline/stage-options-schema.js';
import { ConfigError, loadConfig, loadTemporalConnection } from './config.js';
import { installRuntimeLogging, stageLogInterceptor } from './logging.js';
import { adoptFirstBuildInBackground } from './deployment-control.js';
import { agentTelemetryEnv } from './telemetry/agent-env.js';
import { NO_TELEMETRY, OTEL_WORKFLOW_INTERCEPTORS, startWorkerTelemetry, type WorkerTelemetry } from './telemetry/worker-telemetry.js';
import { workerOptionsFromEnv, type WorkerEnvOptions } from './worker-env.js';
import { workerTrustFromEnv } from './trust/worker-trust.js';
import { clientDataConverter, encryptionCodecOf, storeOfCodecs, storePayloadCodecs, workerDataConverter } from './codec/data-converter.js';
import { openWorkerSubfolder, storeFolder } from './activities/workspace/worker-folder.js';
import { STORE_VARIABLE, storeSecretValues } from './store/store-settings.js';
import type { ObjectStore } from './store/object-store.js';
import { sweepGoneRuns } from './store/run-records.js';
import { WorkflowNotFoundError, type PayloadCodec } from '@temporalio/common';
import { ENCRYPTION_KEY_VARIABLE, encryptionSecretValues } from './codec/encryption-key.js';
import { deploymentFromEnv, pinnedDeploymentOptions } from './worker-deployment.js';
import { checkpointSettingsFromEnv, CheckpointSettingError, type CheckpointOptions } from './activities/checkpoint/settings.js';
import { createOwnerWorkers, ownerClaim, ownerIdFor, runWithOwnerWorkers } from './owner-workers.js';

/** Options for a worker; everything else comes from the environment (see docs/configuration.md). */
export interface StartWorkerOptions {
  env?: NodeJS.ProcessEnv;
  /** Overrides `TEMPORAL_ADDRESS`, e.g. for the embedded dev server. */
  address?: string;
  /** Overrides `AGENT_PIPELINE_TASK_QUEUE`; tests give each file its own queue. */
  taskQueue?: string;
  /**
   * A prebuilt workflow bundle to load instead of the one next to this file. A worker with an encryption key needs one
   * built with the encoded failure converter (`workflow-bundle-encrypted.js`), or its workflows' failures stay plain.
   */
  workflowBundlePath?: string;
  /** Extra worker options, e.g. `maxCachedWorkflows` or the task slots. */
  workerOptions?: Partial<WorkerOptions>;
  /** Overrides `TEMPORAL_NAMESPACE`. */
  namespace?: string;
  /** Overrides `AGENT_PIPELINE_WORKSPACES`. */
  workspacesRoot?: string;
  /** Overrides `AGENT_PIPELINE_MAX_CONCURRENT_STAGES`. */
  maxConcurrentStages?: number;
  /** Backends besides `claude-cli` and `anthropic-api`, by the name a stage's `backend:` selects. */
  backends?: Record<string, StageBackend>;
  /** Traces and metrics (see src/telemetry/); none by default. */
  telemetry?: WorkerTelemetry;
  /**
   * Host folders runs may name in `workspace.repo` and `addDirs` besides the workspaces root, or `'any'`.
   * @default `AGENT_PIPELINE_ALLOWED_PATHS`, else none
   */
  allowedPaths?: AllowedPaths;
  /**
   * Host folders whose pipelines runs that carry no files (`--files-from-worker`) may have read, or `'any'`.
   * @default `AGENT_PIPELINE_PIPELINE_DIRS`, else none (such runs are refused)
   */
  pipelineDirs?: PipelineDirs;
  /**
   * Keys that encrypt and decrypt payloads (`"<keyId>:<base64>[,...]"`, the first encrypting); an empty string turns
   * encryption off. @default `AGENT_PIPELINE_ENCRYPTION_KEY`, else none
   */
  encryptionKey?: string;
  /** Overrides `AGENT_PIPELINE_API_REQUESTS_PER_MINUTE` and `AGENT_PIPELINE_API_CONCURRENT_REQUESTS` (docs/rate-limits.md). */
  apiKeyLimits?: ApiKeyLimits;
  /** Overrides `AGENT_PIPELINE_SANDBOX`. @default `AGENT_PIPELINE_SANDBOX`, else `required` */
  sandbox?: SandboxMode;
  /**
   * How long a host found unable to sandbox is believed before the worker checks it again (tests shorten it).
   * @unit milliseconds @default SANDBOX_RECHECK_MS (5 s)
   */
  sandboxRecheckMs?: number;
  /**
   * How long a run waiting for a pipeline-level key waits in the key's workflow before it reports its place (and
   * heartbeats, so a cancel reaches it): tests shorten it. @unit milliseconds @default RUN_LEASE_POLL_MS (10 s)
   */
  leasePollMs?: number;
}

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
interface WorkerResources {
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
async function releaseWorkerResources(resources: WorkerResources): Promise<void> {
  resources.apiKeyLimiter?.stop();
  // Agents started ahead of time for stages this worker will not run now.
  await resources.warmPool?.stopAll();
  // Agents whose stages completed on their result, still shutting down.
  await resources.exitingAgents.allExited();
}

/**
 * Every `everyMs` while the worker runs (the first pass a minute after it starts, or sooner with a shorter interval),
 * deletes the stored objects of runs of its namespace that Temporal no longer keeps: describing such a run finds none.
 */
function sweepStoreWhileRunning(worker: Worker, store: ObjectStore, client: Client, everyMs: number): void {
  const isGone = (runId: string) =>
    client.workflow.getHandle(runId).describe().then(
      () => false,
      (err: unknown) => err instanceof WorkflowNotFoundError,
    );
  const pass = async (): Promise<void> => {
    const state = worker.getState();
    if (state === 'STOPPED' || state === 'FAILED') return clearInterval(timer);
    if (state !== 'RUNNING') return;
    const deleted = await sweepGoneRuns(store, worker.options.namespace, isGone).catch((err: unknown) => {
      Runtime.instance().logger.warn(`the store sweep of ${store.description} failed: ${err instanceof Error ? err.message : String(err)}`);
      return [];
    });
    if (deleted.length > 0) Runtime.instance().logger.info(`deleted the stored objects of ${deleted.length} run(s) Temporal no longer keeps`, { runs: deleted.slice(0, 20) });
  };
  const first = setTimeout(() => void pass(), Math.min(everyMs, 60_000));
  const timer = setInterval(() => void pass(), everyMs);
  first.unref();
  timer.unref();
}

/**
 * Where and how often the worker checkpoints its runs (docs/deployment.md): in its object store
 * (`AGENT_PIPELINE_STORE`); none with `AGENT_PIPELINE_CHECKPOINTS=off`.
 * @throws ConfigError naming the setting that is malformed
 */
function checkpointsFromEnv(env: NodeJS.ProcessEnv, store: ObjectStore): CheckpointOptions | undefined {
  try {
    const settings = checkpointSettingsFromEnv(env);
    if (!settings.enabled) return undefined;
    return { store, everyMs: settings.everyMs, maxBytes: settings.maxBytes, ...(settings.forkPointsOnly ? { forkPointsOnly: true } : {}) };
  } catch (err) {
    if (err instanceof CheckpointSettingError) throw new ConfigError(`[CONFIG_INVALID] ${err.message}`);
    throw err;
  }
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

/**
 * The worker's codecs (encryption when a key is set, then the claim check that moves payloads over
 * AGENT_PIPELINE_CLAIM_CHECK_BYTES to the store) and its store (AGENT_PIPELINE_STORE). Made before connecting: a
 * malformed key or store setting stops the worker at once, naming the variable.
 */
async function workerCodecs(env: NodeJS.ProcessEnv, workspacesRoot: string, keyOption: string | undefined): Promise<{ codecs: PayloadCodec[]; store: ObjectStore; encryptionKey?: string }> {
  const encryptionKey = keyOption ?? env[ENCRYPTION_KEY_VARIABLE];
  const keySource = keyOption === undefined ? {} : { keySource: 'the encryptionKey option' };
  const codecs = storePayloadCodecs(env, { defaultStoreDir: storeFolder(workspacesRoot), role: 'worker', encryptionKey, ...keySource });
  // The default store is the worker's own folder: made as real folders, never through a symlink.
  if (!env[STORE_VARIABLE]?.trim()) await openWorkerSubfolder(workspacesRoot, 'store');
  return { codecs, store: storeOfCodecs(codecs)!, encryptionKey };
}

async function createWorkerWithResources(options: StartWorkerOptions): Promise<{ worker: Worker; resources: WorkerResources }> {
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

/** How often the health file is touched while the worker polls. @unit milliseconds */
const HEALTH_INTERVAL_MS = 5_000;

/**
 * Runs a worker until SIGINT or SIGTERM, then drains: running stages get the grace time to finish, after which they
 * are cancelled and retried elsewhere. Logs go through the Temporal runtime logger (JSON lines when stderr is not a TTY).
 */
export async function runWorker(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const settings = workerOptionsFromEnv(env);
  // Read first: a key that cannot be read stops the worker before it connects. Key ids only are logged, never keys.
  const trust = workerTrustFromEnv(env);
  const telemetry = await startWorkerTelemetry(env);
  const logger = installRuntimeLogging(env, telemetry.runtimeMetrics);
  const { worker, resources } = await createWorkerWithResources({ env, telemetry });
  logger.info('agent-pipeline worker polling', {
    taskQueue: worker.options.taskQueue,
    namespace: worker.options.namespace,
    maxConcurrentStages: settings.maxConcurrentStages,
    maxConcurrentWorkflowTasks: settings.maxConcurrentWorkflowTasks,
    shutdownGraceMs: settings.shutdownGraceMs,
    prewarm: settings.prewarm.enabled ? `on (ttl ${settings.prewarm.ttlMs} ms)` : 'off',
    sandbox: describeSandboxMode(settings.sandbox, trust.runKeys.size > 0),
    trustedKeys: [...trust.runKeys.keys()].join(',') || '(any run)',
    pipelineDirs: settings.pipelineDirs === 'any' ? '*' : settings.pipelineDirs?.join(path.delimiter) || '(none: --files-from-worker runs refused)',
    decisionKeys: [...trust.decisionKeys.keys()].join(',') || '(any decision)',
    workspacesRoot: loadConfig(env).workspacesRoot,
    ...worker.options.workerDeploymentOptions?.version,
  });
  await warnOfSandbox(resources.sandboxHost, settings.sandbox, logger);
  if (settings.sandboxAllowLocal) logger.warn("AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL=1: pipelines may let agents' Bash reach this host's own services (Temporal, the codec server) and the cloud's metadata service");
  const adopting = adoptFirstBuildInBackground(worker, logger);
  const onSignal = (signal: string): void =>
    logger.info('shutting down: running stages get the grace time, then are cancelled and retried on another worker', { signal, shutdownGraceMs: settings.shutdownGraceMs });
  process.once('SIGTERM', onSignal).once('SIGINT', onSignal);
  const health = settings.healthFile ? keepHealthFile(settings.healthFile, () => worker.getState() === 'RUNNING') : undefined;
  try {
    await worker.run();
  } finally {
    adopting.abort();
    clearInterval(health);
    await releaseWorkerResources(resources);
    if (settings.healthFile) await rm(settings.healthFile, { force: true });
    // The connection would keep the process alive after the worker stopped.
    await worker.connection?.close();
    await telemetry.shutdown();
  }
  logger.info('agent-pipeline worker stopped');
}

/** Touches `file` while `healthy()` holds; a container health check reads its age (`agent-pipeline worker --health-check`). */
function keepHealthFile(file: string, healthy: () => boolean): NodeJS.Timeout {
  const touch = (): void => {
    if (healthy()) void writeFile(file, `${new Date().toISOString()}\n`).catch(() => {});
  };
  touch();
  return setInterval(touch, HEALTH_INTERVAL_MS).unref();
}

/** How stale the health file may be before the worker counts as unhealthy. @unit milliseconds */
export const HEALTH_MAX_AGE_MS = 30_000;

/** Resolves to a problem description, or undefined when the worker touched its health file recently. */
export async function checkWorkerHealth(env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  const { healthFile } = workerOptionsFromEnv(env);
  if (!healthFile) return 'AGENT_PIPELINE_HEALTH_FILE is not set, so the worker keeps no health file';
  const info = await stat(healthFile).catch(() => undefined);
  if (!info) return `no health file at ${healthFile}: the worker is not polling`;
  const age = Date.now() - info.mtimeMs;
  return age > HEALTH_MAX_AGE_MS ? `the health file ${healthFile} is ${Math.round(age / 1000)}s old: the worker stopped polling` : undefined;
}

/**
 * Says at start-up, loudly, when agents' Bash may run unsandboxed: the operator switched the sandbox off, lets
 * pipelines switch it off, or the host cannot sandbox (checked again before each stage that needs it).
 */
async function warnOfSandbox(host: () => Promise<SandboxHost>, mode: SandboxMode, logger: { warn(message: string, meta?: Record<string, unknown>): void }): Promise<void> {
  if (mode === 'off') {
    logger.warn(`${SANDBOX_VARIABLE}=off: CLI agents' Bash runs WITHOUT Claude Code's sandbox and can read this worker's environment and files`);
    return;
  }
  if (mode === 'permissive') {
    logger.warn(`${SANDBOX_VARIABLE}=permissive: a pipeline's \`sandbox: false\` runs its agent's Bash WITHOUT Claude Code's sandbox, where it can read this worker's environment and files`);
  }
  const { missing, refused } = await host();
  const effect = mode === 'auto' ? "CLI agents' Bash runs WITHOUT Claude Code's sandbox" : 'every CLI stage that may use Bash will fail with SANDBOX_UNAVAILABLE until it is fixed (no restart needed)';
  if (missing.length > 0) {
    logger.warn(`${missing.join(' and ')} not installed: ${effect}; install with \`${SANDBOX_INSTALL}\``, { sandbox: mode, missingPackages: missing });
  } else if (refused) {
    logger.warn(`bubblewrap cannot create the sandbox's namespaces here (${refused}): ${effect}; in a container see docs/deployment.md`, { sandbox: mode });
  }
}
