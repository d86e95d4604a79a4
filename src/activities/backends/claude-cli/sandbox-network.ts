import { sandboxAllowLocalFromEnv } from '../../../config.js';
import { localHostsOf, SANDBOX_ALLOW_LOCAL_VARIABLE } from '../../../pipeline/local-hosts.js';
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
  const local = localHostsOf(stage.sandbox);
  if (local.length === 0) return;
  let allowed: boolean;
  try {
    allowed = sandboxAllowLocalFromEnv(env);
  } catch (err) {
    throw stageFailure({ type: 'CONFIG_INVALID', stageId: stage.id, message: (err as Error).message, hint: `fix ${SANDBOX_ALLOW_LOCAL_VARIABLE} in the environment of the worker and restart it` });
  }
  if (allowed) return;
  const hosts = local.map((entry) => `"${entry.host}" (${entry.reason})`).join(', ');
  throw stageFailure({
    type: 'CONFIG_INVALID',
    stageId: stage.id,
    message: `sandbox.allowedDomains names ${hosts}: through it the agent's Bash would reach this worker host's own services (Temporal, the codec server) or the cloud's metadata service`,
    hint: `list only the real hosts the agent needs, or, if the worker's operator means agents to reach this host, set ${SANDBOX_ALLOW_LOCAL_VARIABLE}=1 on the worker`,
    details: { allowedDomains: local.map((entry) => entry.host) },
  });
}
