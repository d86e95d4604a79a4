/*
 * Which run (workflow) ids a run may have. Temporal accepts any non-empty string, but a run's id also names its
 * folder under the workspaces root: `.` and `..` would name the root itself or the folder above it, which a clean-up
 * then deletes. Pure, so `start`, the library and the workflow's input check agree.
 */

/** Why `runId` cannot be a run id, or `undefined` when it can. */
export function findRunIdProblem(runId: string): string | undefined {
  if (runId.trim() === '') return 'a run id must not be empty';
  if (runId === '.' || runId === '..') return `"${runId}" cannot be a run id: it names a folder, not a run (choose another --id)`;
  return undefined;
}
