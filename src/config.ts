import path from 'node:path';
import { loadClientConnectConfig, type ClientConnectConfig } from '@temporalio/envconfig';
import { ConfigError } from './errors.js';
import { DEFAULT_TASK_QUEUE } from './contracts/messages.js';
import { SANDBOX_ALLOW_LOCAL_VARIABLE } from './pipeline/local-hosts.js';

// Defined with the base errors (src/errors.ts) so bundle/ throws the same class; exported here, where settings are read.
export { ConfigError };

/** Settings shared by the client and the worker, from the environment (documented in docs/configuration.md). */
export interface AgentPipelineConfig {
  taskQueue: string;
  /** Absolute folder holding one workspace per run. */
  workspacesRoot: string;
  /** Base URL of the Temporal Web UI, for links; empty when unknown. */
  webUiUrl: string;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): AgentPipelineConfig {
  return {
    taskQueue: env.AGENT_PIPELINE_TASK_QUEUE || DEFAULT_TASK_QUEUE,
    workspacesRoot: path.resolve(env.AGENT_PIPELINE_WORKSPACES || path.join('.agent-pipeline', 'workspaces')),
    webUiUrl: (env.AGENT_PIPELINE_WEB_UI ?? defaultWebUi(env.TEMPORAL_ADDRESS)).replace(/\/$/, ''),
  };
}

/**
 * The dev server serves its UI on the gRPC port + 1000, on the same host: the link names the host as the address does
 * (`127.0.0.1:7233` gives `http://127.0.0.1:8233`, the address the dev server prints; it said localhost). A remote
 * cluster's UI address is not guessable.
 */
function defaultWebUi(address: string | undefined): string {
  const match = /^(localhost|127\.0\.0\.1|\[::1\]):(\d+)$/.exec(address ?? 'localhost:7233');
  return match ? `http://${match[1]}:${Number(match[2]) + 1000}` : '';
}

/** The Web UI page of one run. */
export function runUrl(config: AgentPipelineConfig, namespace: string, workflowId: string): string | undefined {
  if (!config.webUiUrl) return undefined;
  return `${config.webUiUrl}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}

/**
 * The Temporal connection settings, exactly as the `temporal` CLI reads them: `TEMPORAL_*` variables over the
 * profile (`TEMPORAL_PROFILE`, default `default`) of the config file (`TEMPORAL_CONFIG_FILE`, default
 * `~/.config/temporalio/temporal.toml`). Certificate files are read here.
 * @throws ConfigError naming what could not be read
 */
export function loadTemporalConnection(env: NodeJS.ProcessEnv = process.env): ClientConnectConfig {
  try {
    return loadClientConnectConfig({ overrideEnvVars: env as Record<string, string> });
  } catch (err) {
    const profile = env.TEMPORAL_PROFILE ? `profile "${env.TEMPORAL_PROFILE}"` : 'the default profile';
    throw new ConfigError(
      `[CONFIG_INVALID] cannot load the Temporal connection settings (TEMPORAL_* variables, ${profile} of ${env.TEMPORAL_CONFIG_FILE ?? '~/.config/temporalio/temporal.toml'}): ${(err as Error).message}`,
      { cause: err },
    );
  }
}

/**
 * Backend names the workers were given besides the built-in ones (`AGENT_PIPELINE_BACKENDS=echo,review-bot`), so
 * `start` and `validate` accept pipelines that select them.
 */
export function extraBackendNames(env: NodeJS.ProcessEnv = process.env): string[] {
  return (env.AGENT_PIPELINE_BACKENDS ?? '').split(',').map((name) => name.trim()).filter(Boolean);
}

/**
 * `AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL`: whether pipelines may list loopback and link-local hosts (`localhost`,
 * `127.0.0.1`, `169.254.169.254`) in `sandbox.allowedDomains`. Workers refuse such pipelines without it; `validate` and
 * `start` read it too, so that a client of such workers accepts what they run. @default false
 * @throws ConfigError naming the variable, its value and what it may be
 */
export function sandboxAllowLocalFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  const raw = (env[SANDBOX_ALLOW_LOCAL_VARIABLE] ?? '').trim().toLowerCase();
  if (raw === '' || raw === '0' || raw === 'false') return false;
  if (raw === '1' || raw === 'true') return true;
  throw new ConfigError(`[CONFIG_INVALID] ${SANDBOX_ALLOW_LOCAL_VARIABLE}=${env[SANDBOX_ALLOW_LOCAL_VARIABLE]} is not 1 or 0; set it to 1 to let pipelines list loopback and link-local hosts, or unset it`);
}
