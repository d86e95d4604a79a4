import { ExitingAgents } from '../activities/backends/claude-cli/agent-exits.js';
import { sandboxHostChecker, type SandboxHost } from '../activities/backends/claude-cli/sandbox-host.js';
import { WarmPool } from '../activities/backends/claude-cli/warm-pool.js';
import type { ApiKeyLimiter } from '../activities/api-key/key-limiter.js';
import { SecretRegistry } from '../activities/secrets.js';
import { encryptionSecretValues } from '../codec/encryption-key.js';
import { storeSecretValues } from '../store/store-settings.js';
import type { WorkerEnvOptions } from './env.js';

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

/** The resources of a worker about to connect; its API key's limiter is added once it has a connection. */
export function createWorkerResources(settings: WorkerEnvOptions, env: NodeJS.ProcessEnv, encryptionKey: string | undefined, sandboxRecheckMs?: number): WorkerResources {
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
