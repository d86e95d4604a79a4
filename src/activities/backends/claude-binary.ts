import { access, constants } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/** The `claude` that `npm ci` installs with this project; the platform package ships the native binary. */
const BUNDLED_CLAUDE = fileURLToPath(new URL('../../../node_modules/.bin/claude', import.meta.url));

/**
 * Finds the Claude Code CLI: `CLAUDE_BIN`, else the copy installed with this project, else `claude`
 * on PATH (resolved by the spawn itself).
 */
export async function findClaudeBinary(env: NodeJS.ProcessEnv = process.env): Promise<string> {
  if (env.CLAUDE_BIN) return env.CLAUDE_BIN;
  try {
    await access(BUNDLED_CLAUDE, constants.X_OK);
    return BUNDLED_CLAUDE;
  } catch {
    return 'claude';
  }
}
