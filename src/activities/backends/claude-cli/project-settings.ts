import path from 'node:path';
import { stageFailure } from '../../failures.js';
import { readFileExcerpt } from '../../prompt/file-excerpt.js';

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
 * Fails the stage, before its agent starts, when the workspace's settings set a helper command that the worker's own
 * settings (`settings`, which outrank the project's) do not: Claude Code would run the run's command with the worker's
 * reach. An operator's helper wins over the project's, so it runs instead and the stage goes on.
 * @throws CONFIG_INVALID naming the file and the setting
 */
export async function refuseProjectHelpers(stageId: string, workspaceDir: string, settings: Record<string, unknown>): Promise<void> {
  for (const relative of PROJECT_SETTINGS_FILES) {
    const found = await projectHelpers(path.join(workspaceDir, relative), workspaceDir);
    const chosen = found.filter((key) => key === 'unreadable' || settings[key] === undefined);
    if (chosen.length === 0) continue;
    const what = chosen[0] === 'unreadable' ? 'cannot be checked (a symlink leading out of the workspace, or too large)' : `sets ${chosen.join(', ')}`;
    throw stageFailure({
      type: 'CONFIG_INVALID',
      stageId,
      message: `the workspace's ${relative} ${what}: Claude Code would run ${chosen[0] === 'unreadable' ? 'its helper commands' : 'that command'} outside the sandbox, with the worker's files and credentials in reach`,
      hint: `remove it from ${relative} in the repository or the stage that wrote it; a helper the agents need goes in the worker's AGENT_PIPELINE_CLAUDE_SETTINGS`,
      details: { file: relative, settings: chosen },
    });
  }
}

/** The helper commands a settings file sets; `unreadable` when it exists and cannot be read whole inside the workspace. */
async function projectHelpers(file: string, workspaceDir: string): Promise<string[]> {
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
  if (parsed === null || typeof parsed !== 'object') return [];
  return HELPER_COMMANDS.filter((key) => (parsed as Record<string, unknown>)[key] !== undefined);
}
