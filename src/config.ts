import path from 'node:path';
import { DEFAULT_TASK_QUEUE } from './workflows/messages.js';

/** Settings shared by the client and the worker, from the environment (documented in the README). */
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

/** The dev server serves its UI on the gRPC port + 1000; a remote cluster's UI address is not guessable. */
function defaultWebUi(address: string | undefined): string {
  const match = /^(localhost|127\.0\.0\.1):(\d+)$/.exec(address ?? 'localhost:7233');
  return match ? `http://localhost:${Number(match[2]) + 1000}` : '';
}

/** The Web UI page of one run. */
export function runUrl(config: AgentPipelineConfig, namespace: string, workflowId: string): string | undefined {
  if (!config.webUiUrl) return undefined;
  return `${config.webUiUrl}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}
