import { createRequire } from 'node:module';
import path from 'node:path';
import { findExecutable } from '../../process/find-executable.js';

/** The package that ships the `claude` command this project depends on. */
const CLAUDE_PACKAGE = '@anthropic-ai/claude-code';

/**
 * The `claude` installed with this package, wherever npm put its dependency (beside it, hoisted into a user's
 * `node_modules`, or in this clone's), found as Node finds the package: a path worked out from this file's folder
 * broke when the file moved. Undefined when the package is not installed.
 */
function bundledClaude(): string | undefined {
  try {
    const require = createRequire(import.meta.url);
    const manifest = require.resolve(`${CLAUDE_PACKAGE}/package.json`);
    const { bin } = require(manifest) as { bin?: string | Record<string, string> };
    const relative = typeof bin === 'string' ? bin : bin?.claude;
    return relative ? path.join(path.dirname(manifest), relative) : undefined;
  } catch {
    return undefined;
  }
}

/** Where the worker looks for the Claude Code CLI, for messages when it is not there. */
export function describeClaudeLookup(env: NodeJS.ProcessEnv): string {
  if (env.CLAUDE_BIN) return `CLAUDE_BIN=${env.CLAUDE_BIN}`;
  return `${bundledClaude() ?? `the ${CLAUDE_PACKAGE} package (not installed)`} or \`claude\` on PATH`;
}

/**
 * Finds the Claude Code CLI: `CLAUDE_BIN` (a path, or a name looked up in PATH), else the copy
 * installed with this package, else `claude` on PATH. Returns `undefined` when none is executable.
 */
export async function findClaudeBinary(env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  if (env.CLAUDE_BIN) return findExecutable(env.CLAUDE_BIN, env);
  const bundled = bundledClaude();
  return (bundled ? await findExecutable(bundled, env) : undefined) ?? (await findExecutable('claude', env));
}
