import path from 'node:path';
import { stageFailure } from '../../failures.js';
import { readFileExcerpt } from '../../prompt/file-excerpt.js';
import { objectAt } from './settings-json.js';

/**
 * The settings Claude Code reads from the agent's workspace: a repository's, or what an earlier stage wrote there. The
 * sandbox keeps agents from writing them; the run still chooses them.
 */
export const PROJECT_SETTINGS_FILES = ['.claude/settings.json', '.claude/settings.local.json'];

/**
 * Settings whose value is a command Claude Code runs itself, outside the sandbox, with the worker's reach: to get an API
 * key, AWS credentials, telemetry headers. Hooks, the other such commands, are off for every agent (agent-settings.ts).
 */
const HELPER_COMMANDS = ['apiKeyHelper', 'awsAuthRefresh', 'awsCredentialExport', 'otelHeadersHelper'];

/** Far beyond any settings file; a bigger one cannot be checked. @unit bytes */
const MAX_SETTINGS_BYTES = 1_000_000;

/**
 * Fails the stage, before its agent starts, when the workspace's settings choose what Claude Code runs or how it runs
 * outside the sandbox, and the worker's own settings (`settings`, which outrank the project's) do not: a helper command
 * (it would run the run's command with the worker's reach), or an `env` variable (Claude Code applies it to itself:
 * `ANTHROPIC_BASE_URL` sent the worker's API key to the run's server, `LD_PRELOAD` or a proxy reach every program it
 * starts). An operator's helper or variable wins over the project's, so it applies instead and the stage goes on.
 * @throws CONFIG_INVALID naming the file and the settings
 */
export async function refuseProjectHelpers(stageId: string, workspaceDir: string, settings: Record<string, unknown>): Promise<void> {
  const operatorEnv = objectAt(settings.env);
  for (const relative of PROJECT_SETTINGS_FILES) {
    const found = await projectChoices(path.join(workspaceDir, relative), workspaceDir);
    const chosen = found.filter((key) => key === 'unreadable' || (key.startsWith(ENV_PREFIX) ? operatorEnv[key.slice(ENV_PREFIX.length)] : settings[key]) === undefined);
    if (chosen.length === 0) continue;
    throw stageFailure({
      type: 'CONFIG_INVALID',
      stageId,
      message: `the workspace's ${relative} ${describeChoices(chosen)}, with the worker's files and credentials in reach`,
      hint: `remove it from ${relative} in the repository or the stage that wrote it; what the agents need goes in the worker's AGENT_PIPELINE_CLAUDE_SETTINGS`,
      details: { file: relative, settings: chosen },
    });
  }
}

/** How a project's `env` variable is named among the settings found: `env.NAME`. */
const ENV_PREFIX = 'env.';

/** What the refusal says the file does. */
function describeChoices(chosen: string[]): string {
  if (chosen[0] === 'unreadable') return 'cannot be checked (a symlink leading out of the workspace, or too large): Claude Code would run its helper commands and apply its variables outside the sandbox';
  const helpers = chosen.filter((key) => !key.startsWith(ENV_PREFIX));
  const variables = chosen.filter((key) => key.startsWith(ENV_PREFIX));
  return [
    helpers.length > 0 ? `sets ${helpers.join(', ')}: Claude Code would run that command outside the sandbox` : '',
    variables.length > 0 ? `sets ${variables.join(', ')}: Claude Code would apply ${variables.length > 1 ? 'them' : 'it'} to itself and the programs it starts outside the sandbox (a base URL or proxy sends the worker's credentials there)` : '',
  ].filter(Boolean).join('; it ');
}

/**
 * The helper commands and `env` variables (as `env.NAME`) a settings file sets; `unreadable` when it exists and cannot
 * be read whole inside the workspace.
 */
async function projectChoices(file: string, workspaceDir: string): Promise<string[]> {
  const read = await readFileExcerpt(file, MAX_SETTINGS_BYTES, workspaceDir).catch((err: NodeJS.ErrnoException) => err);
  if (read instanceof Error) return read.code === 'ENOENT' || read.code === 'ENOTDIR' ? [] : ['unreadable'];
  if (read.cut) return ['unreadable'];
  let parsed: unknown;
  try {
    parsed = JSON.parse(read.text);
  } catch {
    // Claude Code reads no settings from a file that is not JSON either.
    return [];
  }
  const fields = objectAt(parsed);
  return [...HELPER_COMMANDS.filter((key) => fields[key] !== undefined), ...Object.keys(objectAt(fields.env)).map((name) => `${ENV_PREFIX}${name}`)];
}
