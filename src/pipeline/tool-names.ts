/*
 * Tool names and rules for Claude Code (`Read`, `Bash(npm test:*)`, `mcp__github__create_issue`), as a pipeline's
 * `allowedTools` / `disallowedTools` and `approve --allow` give them. They reach `claude` as arguments, so one that
 * starts with `-` would read as a flag. Pure: the schema, the workflow's update validator and the CLI share it.
 */

/** A tool name: not empty, not starting with `-` or a space. */
export const TOOL_NAME = /^[^-\s]/;

/** Why `name` cannot be a tool name, or `undefined` when it can. */
export function findToolNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
    return `${JSON.stringify(name)} is not a tool name; give one such as Read or "Bash(npm test:*)", never starting with "-"`;
  }
  return undefined;
}
