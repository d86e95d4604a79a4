import { randomUUID } from 'node:crypto';
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ResolvedStage } from '../../../pipeline/stage-options.js';
import { stageFailure } from '../../failures.js';
import { SETTINGS_VARIABLE } from './agent-auth.js';
import { decideSandbox, type RunSigning, type SandboxDecision } from './sandbox-decision.js';
import { checkSandboxHost, type SandboxHost } from './sandbox-host.js';
import { SANDBOX_VARIABLE, sandboxRequired, type SandboxMode } from './sandbox-mode.js';
import { applyReadLimits, readLimitsFor, type AgentReadScope } from './agent-reads.js';
import { refuseLocalHosts } from './sandbox-network.js';
import { withDeniedRules } from './own-folder-rules.js';
import { refuseProjectHelpers } from './project-settings.js';
import { refuseLinkedMemoryFiles } from './memory-links.js';
import { type Json, objectAt } from './settings-json.js';

/*
 * The one settings file an attempt's agent gets with `--settings`: the operator's `AGENT_PIPELINE_CLAUDE_SETTINGS`,
 * then the pipeline's `sandbox` options, then what the worker enforces, merged in that order so the later wins. It is
 * written with mode 0600 next to the stage's other files; neither it nor its content ever reaches the command line.
 */

/** The operator's settings (`AGENT_PIPELINE_CLAUDE_SETTINGS`: a file, or inline JSON), as an object. */
export async function readOperatorSettings(env: NodeJS.ProcessEnv): Promise<Json> {
  const raw = env[SETTINGS_VARIABLE]?.trim();
  if (!raw) return {};
  const inline = raw.startsWith('{');
  let parsed: unknown;
  try {
    parsed = JSON.parse(inline ? raw : await readFile(raw, 'utf8'));
  } catch (err) {
    const what = inline ? 'its inline JSON' : `the file ${raw}`;
    throw new Error(`${SETTINGS_VARIABLE}: cannot read ${what} as JSON (${(err as Error).message.split('\n')[0]}); give a settings file or a JSON object`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error(`${SETTINGS_VARIABLE} must hold a JSON object`);
  return parsed as Json;
}

/**
 * The merged settings: the operator's, then the pipeline's sandbox options, then the worker's rules. With the sandbox
 * on nothing below weakens it: no unsandboxed escape hatch, Bash still limited by `allowedTools` and the permission
 * mode unless the pipeline asks for `autoAllowBash`, and with `required` (or `permissive`) the CLI refuses to start without a sandbox.
 */
export function mergeAgentSettings(operator: Json, stage: ResolvedStage, decision: SandboxDecision, mode: SandboxMode): Json {
  const option = typeof stage.sandbox === 'object' ? stage.sandbox : {};
  const sandbox = objectAt(operator.sandbox);
  if (!decision.enabled) {
    // Off: the operator's own sandbox settings, if any, stay as they were (an operator may still run one).
    return mode === 'off' || Object.keys(sandbox).length === 0 ? operator : { ...operator, sandbox: { ...sandbox, enabled: false } };
  }
  const network = objectAt(sandbox.network);
  const operatorDomains = Array.isArray(network.allowedDomains) ? (network.allowedDomains as unknown[]).filter((d) => typeof d === 'string') : [];
  const allowedDomains = [...new Set([...operatorDomains, ...(option.allowedDomains ?? [])])];
  const enforced: Json = {
    ...sandbox,
    enabled: true,
    network: { ...network, allowedDomains },
    allowUnsandboxedCommands: false,
    autoAllowBashIfSandboxed: option.autoAllowBash === true,
    failIfUnavailable: sandboxRequired(mode),
  };
  if (sandboxRequired(mode)) Object.assign(enforced, REQUIRED_OVERRIDES, { filesystem: { ...objectAt(sandbox.filesystem), disabled: false } });
  return { ...operator, sandbox: enforced };
}

/**
 * What `required` also turns off in the operator's sandbox settings, each a way around the sandbox the CLI itself names
 * as weakening: commands run outside it, the host's /proc shown inside it (the worker's environment with it), a looser
 * network lock. An operator who needs one (a container without user namespaces) runs with `auto` and says so.
 */
const REQUIRED_OVERRIDES = { excludedCommands: [], enableWeakerNestedSandbox: false, enableWeakerNetworkIsolation: false } as const;

/**
 * Writes the attempt's settings file `name` in `stageDir` (mode 0600) and returns its path. A file that already holds the same
 * settings is left as it is, so an agent started ahead of time for the stage still matches it.
 */
export async function writeAgentSettings(stageDir: string, settings: Json, name = 'settings.json'): Promise<string> {
  const file = path.join(stageDir, name);
  const text = `${JSON.stringify(settings, null, 2)}\n`;
  const current = await readFile(file, 'utf8').catch(() => undefined);
  if (current !== text) {
    await mkdir(stageDir, { recursive: true });
    // Created 0600 from the start (never readable by others, not even briefly), then renamed into place.
    const temp = `${file}.${randomUUID()}.tmp`;
    try {
      await writeFile(temp, text, { mode: 0o600 });
      await rename(temp, file);
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
  }
  // An existing file may have been made by an earlier version, or touched by the agent: its mode is set either way.
  await chmod(file, 0o600);
  return file;
}

/** The attempt's settings file and what was decided about its sandbox. */
export interface AgentSettingsFile {
  file: string;
  sandbox: SandboxDecision;
}

/** What decides an attempt's sandbox besides its stage: the worker's mode and host, and the run's signature. */
export interface AttemptSandbox {
  mode: SandboxMode;
  /** What the host offers the sandbox (`sandboxHostChecker`). @default checked on every call */
  host?: () => Promise<SandboxHost>;
  /** For a stage's `sandbox: false` under `permissive`. @default a worker that requires no signed runs */
  signing?: RunSigning;
}

/** An attempt's merged settings, before they are written, and what was decided about its sandbox. */
export interface AgentSettings {
  settings: Json;
  sandbox: SandboxDecision;
}

/**
 * Decides the attempt's sandbox, merges its settings, limits what the agent may read (`scope`: where it works) and adds
 * the permission rules `denied` (see own-folder-rules.ts) to what the file tools may never do. The command stages'
 * sandbox is fed from the same settings (command-sandbox.ts).
 * @throws the `SANDBOX_OPT_OUT_REFUSED` failure when the stage says `sandbox: false` where the worker does not allow it,
 * `SANDBOX_UNAVAILABLE` when the worker requires the sandbox and the host cannot provide it, `CONFIG_INVALID` when
 * the operator's settings cannot be read or the stage lists a local host the worker refuses
 */
export async function buildAgentSettings(stage: ResolvedStage, env: NodeJS.ProcessEnv, scope: AgentReadScope, attempt: AttemptSandbox, denied: string[] = []): Promise<AgentSettings> {
  refuseLocalHosts(stage, env);
  const { mode, host = () => checkSandboxHost(env) } = attempt;
  const sandbox = decideSandbox(stage, mode, mode === 'off' ? { missing: [] } : await host(), attempt.signing);
  if (sandbox.refused) throw stageFailure({ type: 'SANDBOX_OPT_OUT_REFUSED', stageId: stage.id, ...sandbox.refused });
  if (sandbox.unavailable) throw sandboxUnavailable(stage.id, mode, sandbox.unavailable);
  let operator: Json;
  try {
    operator = await readOperatorSettings(env);
  } catch (err) {
    throw stageFailure({ type: 'CONFIG_INVALID', stageId: stage.id, message: (err as Error).message, hint: `fix ${SETTINGS_VARIABLE} in the environment of the worker and restart it` });
  }
  const settings = applyReadLimits(mergeAgentSettings(operator, stage, sandbox, mode), await readLimitsFor(env, scope), sandbox.enabled);
  return { settings: { ...withDeniedRules(settings, denied), ...NO_RUN_CHOSEN_COMMANDS }, sandbox };
}

/**
 * Claude Code runs hooks and a project's `.mcp.json` servers itself, outside the sandbox, with the worker's reach. A
 * workspace's `.claude/settings*.json` (a repository's, or what an earlier stage wrote) would choose them, so no agent
 * runs hooks, the operator's included, and none starts a project's servers; `--settings` outranks the project's files.
 */
const NO_RUN_CHOSEN_COMMANDS: Json = { disableAllHooks: true, enableAllProjectMcpServers: false };

/** The `SANDBOX_UNAVAILABLE` failure of a stage the worker must sandbox and its host cannot. */
function sandboxUnavailable(stageId: string, mode: SandboxMode, { reason, missing }: NonNullable<SandboxDecision['unavailable']>): Error {
  const install = missing.length > 0 ? `install ${missing.join(' and ')} on the worker (\`apt-get install -y ${missing.join(' ')}\` on Debian or Ubuntu)` : 'give the worker user namespaces (in a container: docs/deployment.md)';
  return stageFailure({
    type: 'SANDBOX_UNAVAILABLE',
    stageId,
    message: `the worker requires Claude Code's sandbox (${SANDBOX_VARIABLE}=${mode}), and ${reason}`,
    // The worker checks its host again within seconds: no restart needed once the packages are there.
    hint: `${install}, then retry the stage; or, on a worker only you use, set ${SANDBOX_VARIABLE}=auto`,
    details: { missingPackages: missing },
  });
}

/**
 * {@link buildAgentSettings}, written in the stage's folder (mode 0600) for the agent's `--settings`, once the workspace's
 * own settings are known to choose no helper command nor variable (project-settings.ts) and its memory files to lead
 * nowhere outside it (memory-links.ts).
 */
export async function prepareAgentSettings(stage: ResolvedStage, env: NodeJS.ProcessEnv, scope: AgentReadScope, attempt: AttemptSandbox, denied: string[] = []): Promise<AgentSettingsFile> {
  const { settings, sandbox } = await buildAgentSettings(stage, env, scope, attempt, denied);
  await refuseProjectHelpers(stage.id, scope.workspaceDir, settings);
  await refuseLinkedMemoryFiles(stage.id, scope.workspaceDir);
  return { file: await writeAgentSettings(scope.stageDir, settings), sandbox };
}
