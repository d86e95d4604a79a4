import { isDynamicPattern, glob } from 'tinyglobby';
import { resolveInside } from '../../files/inside.js';
import { existsSync } from 'node:fs';

/**
 * A stage's `expects:`: files (paths or globs, workspace-relative) it must leave behind. Checked after the
 * agent finished, so a stage that forgot a deliverable fails `OUTPUT_MISSING` instead of handing a later
 * stage nothing.
 */

/** Patterns of `expects` that match nothing in the workspace, as written. @throws Error for a pattern that leaves the workspace */
export async function findMissingExpected(workspaceDir: string, patterns: readonly string[]): Promise<string[]> {
  const missing: string[] = [];
  for (const pattern of patterns) {
    if (!resolveInside(workspaceDir, pattern.replace(/[*?[\]{}()!]/g, '_'))) {
      throw new OutsideWorkspaceError(pattern);
    }
    if (isDynamicPattern(pattern)) {
      const matches = await glob(pattern, { cwd: workspaceDir, dot: true, onlyFiles: false, ignore: ['.agent-pipeline/**', '.git/**'], expandDirectories: false });
      if (matches.length === 0) missing.push(pattern);
    } else if (!existsSync(resolveInside(workspaceDir, pattern)!)) {
      missing.push(pattern);
    }
  }
  return missing;
}

/** Thrown for an `expects` entry that names a place outside the run's workspace. */
export class OutsideWorkspaceError extends Error {
  override readonly name = 'OutsideWorkspaceError';
  constructor(readonly pattern: string) {
    super(`expects entry ${pattern} is outside the run's workspace; use a workspace-relative path such as docs/spec.md`);
  }
}

/** The message that continues the agent's session when it left out expected files. */
export function missingFilesMessage(missing: readonly string[]): string {
  const list = missing.map((m) => `\`${m}\``).join(', ');
  return (
    `You did not write ${list}, which this stage must leave in the workspace. Do not redo the rest of the work: ` +
    `write ${missing.length > 1 ? 'them' : 'it'} now, then finish your answer as before.`
  );
}
