import { sandboxAllowLocalFromEnv } from '../../../config.js';
import type { McpServer } from '../../../pipeline/agent-access-schema.js';
import { localHostsOf, localMcpHostsOf, SANDBOX_ALLOW_LOCAL_VARIABLE, type LocalHostEntry } from '../../../pipeline/local-hosts.js';
import type { ResolvedStage } from '../../../pipeline/stage-options.js';
import { stageFailure } from '../../failures.js';

/*
 * What a pipeline may open of the network to its agents' sandboxed Bash. The worker checks a run's input before its
 * first stage (run-input.ts), but a stage checks again: a run started before this worker's release, or under another
 * worker's settings, reaches here without that check.
 */

/**
 * Fails the stage when its `sandbox.allowedDomains` names a loopback or link-local host (`localhost`, `127.1`,
 * `169.254.169.254`) and the worker does not allow them (AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL).
 * @throws the `CONFIG_INVALID` failure naming the field, the value and the setting
 */
export function refuseLocalHosts(stage: ResolvedStage, env: NodeJS.ProcessEnv): void {
  refuseUnlessAllowed(stage.id, env, localHostsOf(stage.sandbox), {
    field: 'sandbox.allowedDomains',
    detail: 'allowedDomains',
    reach: "through it the agent's Bash would reach this worker host's own services (Temporal, the codec server) or the cloud's metadata service",
  });
}

/**
 * Fails the stage when an HTTP or SSE server of its MCP servers (the pipeline's merged with the stage's) has a `url` on
 * such a host, under the same setting: Claude Code connects to them itself, outside the sandbox (local-hosts.ts).
 * @throws the `CONFIG_INVALID` failure naming the server, the host and the setting
 */
export function refuseLocalMcpHosts(stageId: string, servers: Record<string, McpServer>, env: NodeJS.ProcessEnv): void {
  const local = localMcpHostsOf(servers);
  const names = [...new Set(local.map((entry) => String(entry.path[1])))];
  refuseUnlessAllowed(stageId, env, local, {
    field: `the url of MCP server${names.length > 1 ? 's' : ''} ${names.map((name) => `"${name}"`).join(', ')}`,
    detail: 'mcpServerHosts',
    reach: "Claude Code connects to it itself, outside the sandbox, so the agent's MCP requests would reach this worker host's own services or the cloud's metadata service",
  });
}

function refuseUnlessAllowed(stageId: string, env: NodeJS.ProcessEnv, local: LocalHostEntry[], what: { field: string; detail: string; reach: string }): void {
  if (local.length === 0) return;
  let allowed: boolean;
  try {
    allowed = sandboxAllowLocalFromEnv(env);
  } catch (err) {
    throw stageFailure({ type: 'CONFIG_INVALID', stageId, message: (err as Error).message, hint: `fix ${SANDBOX_ALLOW_LOCAL_VARIABLE} in the environment of the worker and restart it` });
  }
  if (allowed) return;
  const hosts = local.map((entry) => `"${entry.host}" (${entry.reason})`).join(', ');
  throw stageFailure({
    type: 'CONFIG_INVALID',
    stageId,
    message: `${what.field} names ${hosts}: ${what.reach}`,
    hint: `list only the real hosts the agent needs, or, if the worker's operator means agents to reach this host, set ${SANDBOX_ALLOW_LOCAL_VARIABLE}=1 on the worker`,
    details: { [what.detail]: local.map((entry) => entry.host) },
  });
}
