import { Client } from '@temporalio/client';
import type { PayloadCodec } from '@temporalio/common';
import { NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { createActivities } from '../activities/index.js';
import { createWorkerLimiter } from '../activities/api-key/worker-limiter.js';
import type { StageBackend } from '../activities/backends/stage-backend.js';
import { BACKENDS } from '../pipeline/stage-options-schema.js';
import { ConfigError, loadConfig, loadTemporalConnection } from '../config.js';
import { stageLogInterceptor } from '../logging.js';
import { NO_TELEMETRY, OTEL_WORKFLOW_INTERCEPTORS } from '../telemetry/worker-telemetry.js';
import { workerActivities } from './activities.js';
import { prebuiltBundle, WORKFLOWS_PATH } from './bundles.js';
import { workerOptionsFromEnv, type WorkerEnvOptions } from './env.js';
import type { StartWorkerOptions } from './options.js';
import { createWorkerResources, type WorkerResources } from './resources.js';
import { checkStoreAtStart, sweepStoreWhileRunning, workerCodecs } from './store.js';
import { clientDataConverter, encryptionCodecOf, workerDataConverter } from '../codec/data-converter.js';
import { deploymentFromEnv, pinnedDeploymentOptions } from './deployment.js';
import { createOwnerWorkers, ownerClaim, ownerIdFor, runWithOwnerWorkers } from './owner-workers.js';
import { connectWorker } from './worker-connection.js';

/** Connects to Temporal and creates a worker for the pipeline workflow and its activities. */
export async function createPipelineWorker(options: StartWorkerOptions = {}): Promise<Worker> {
  return (await createWorkerWithResources(options)).worker;
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
  await checkStoreAtStart(store, (message) => Runtime.instance().logger.warn(message));
  const connection = await connectWorker({ ...connectionOptions, address: options.address ?? connectionOptions.address });
  const apiKey = env.ANTHROPIC_API_KEY;
  const resources = createWorkerResources(settings, env, encryptionKey, options.sandboxRecheckMs);
  const workerNamespace = options.namespace ?? namespace ?? 'default';
  const taskQueue = options.taskQueue ?? config.taskQueue;
  // The worker's own client, for the API key's limiter and the store sweep: its signals, updates, memo and queries are
  // encoded as the worker's own payloads are.
  const client = new Client({ connection, namespace: workerNamespace, dataConverter: clientDataConverter(codecs) });
  resources.apiKeyLimiter = apiKey
    ? createWorkerLimiter({
        apiKey,
        limits: options.apiKeyLimits ?? settings.apiKeyLimits,
        client,
        taskQueue,
        warn: (message) => Runtime.instance().logger.warn(message),
      })
    : undefined;
  const owner = ownerClaim(taskQueue, options.workerOptions?.identity, settings.ownerTimeoutMs, await ownerIdFor(workspacesRoot, env));
  const activities = workerActivities({ options, settings, env, apiKey, workspacesRoot, store, owner, resources });
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
  if (settings.storeSweepMs !== undefined) sweepStoreWhileRunning(worker, store, client, settings.storeSweepMs);
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
