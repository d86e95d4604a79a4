import path from 'node:path';
import { rm } from 'node:fs/promises';
import { SANDBOX_INSTALL, type SandboxHost } from '../activities/backends/claude-cli/sandbox-host.js';
import { describeSandboxMode, SANDBOX_VARIABLE, type SandboxMode } from '../activities/backends/claude-cli/sandbox-mode.js';
import { loadConfig } from '../config.js';
import { adoptFirstBuildInBackground } from './deployment-control.js';
import { installRuntimeLogging } from '../logging.js';
import { createWorkerWithResources } from './create-worker.js';
import { startWorkerTelemetry } from '../telemetry/worker-telemetry.js';
import { workerTrustFromEnv } from '../trust/worker-trust.js';
import { workerOptionsFromEnv } from './env.js';
import { keepHealthFile } from './health-file.js';
import { releaseWorkerResources } from './resources.js';

/*
 * The worker as a process (`agent-pipeline worker`): its start-up log and warnings, its signals and drain, and the
 * health file a container's health check reads (kept by worker-health.ts).
 */

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
