import { existsSync } from 'node:fs';
import { resolveInside } from '../../files/inside.js';

/**
 * Outputs whose name says they hold paths: `file`, `files`, `path`, `paths`, `spec_file`,
 * `test-paths`, `specFile`, `outputPaths` (but not `profile`).
 */
export function isPathOutput(key: string): boolean {
  return /^(?:files?|paths?)$/i.test(key) || /[_-](?:files?|paths?)$/i.test(key) || /[a-z0-9](?:Files?|Paths?)$/.test(key);
}

/**
 * Checks the paths an agent reported in its outputs. A path outside the workspace is dropped from
 * the outputs (later stages must not be pointed at it) and reported; a path that does not exist is
 * kept and reported.
 */
export function checkReportedPaths(
  workspaceDir: string,
  outputs: Record<string, unknown>,
): { outputs: Record<string, unknown>; warnings: string[] } {
  const warnings: string[] = [];
  const checked: Record<string, unknown> = { ...outputs };
  const keep = (key: string, value: string): boolean => {
    const full = resolveInside(workspaceDir, value);
    if (!full) {
      warnings.push(`output "${key}": ${value} is outside the workspace; it was dropped from the stage's outputs`);
      return false;
    }
    if (!existsSync(full)) warnings.push(`output "${key}": ${value} does not exist in the workspace`);
    return true;
  };
  for (const [key, value] of Object.entries(outputs)) {
    if (!isPathOutput(key)) continue;
    if (typeof value === 'string') {
      if (!keep(key, value)) delete checked[key];
    } else if (Array.isArray(value)) {
      checked[key] = value.filter((item) => typeof item !== 'string' || keep(key, item));
    }
  }
  return { outputs: checked, warnings };
}
