import { fileURLToPath } from 'node:url';
import { findExecutable } from '../../process/find-executable.js';

/** The `claude` that `npm ci` installs with this project; the platform package ships the native binary. */
const BUNDLED_CLAUDE = fileURLToPath(new URL('../../../node_modules/.bin/claude', import.meta.url));

/** Where the worker looks for the Claude Code CLI, for messages when it is not there. */
export function describeClaudeLookup(env: NodeJS.ProcessEnv): string {
  return env.CLAUDE_BIN ? `CLAUDE_BIN=${env.CLAUDE_BIN}` : `${BUNDLED_CLAUDE} or \`claude\` on PATH`;
}

/**
 * Finds the Claude Code CLI: `CLAUDE_BIN` (a path, or a name looked up in PATH), else the copy
 * installed with this project, else `claude` on PATH. Returns `undefined` when none is executable.
 */
export async function findClaudeBinary(env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  if (env.CLAUDE_BIN) return findExecutable(env.CLAUDE_BIN, env);
  return (await findExecutable(BUNDLED_CLAUDE, env)) ?? (await findExecutable('claude', env));
}
