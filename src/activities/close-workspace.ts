import { activityInfo } from '@temporalio/activity';
import { existsSync } from 'node:fs';
import { readEndedMarker, removeRunWorkspace, writeEndedMarker } from './workspace/remove-workspace.js';
import { runFolder } from './workspace/run-folder.js';
import type { CloseWorkspaceInput, CloseWorkspaceResult } from '../contracts/activities.js';

/**
 * Creates the activity that ends a run's workspace: records that the run ended (for `agent-pipeline prune`), then
 * removes the worktree or folder when `keep` says so: `never` always, `onFailure` unless the run failed.
 */
export function createCloseWorkspace(deps: { workspacesRoot: string }) {
  return async function closeWorkspace(input: CloseWorkspaceInput): Promise<CloseWorkspaceResult> {
    const dir = runFolder(deps.workspacesRoot, input.runId);
    if (!existsSync(dir)) return { removed: false, warnings: [] };
    const pushed = input.pushed || ((await readEndedMarker(dir))?.pushed ?? false);
    const temporalRunId = activityInfo().workflowExecution?.runId;
    await writeEndedMarker(dir, { runId: input.runId, temporalRunId, status: input.status, endedAt: Date.now(), pushed });
    const remove = input.keep === 'never' || (input.keep === 'onFailure' && input.status === 'completed');
    if (!remove) return { removed: false, warnings: [] };
    const warnings = await removeRunWorkspace(deps.workspacesRoot, dir, pushed);
    return { removed: !existsSync(dir), warnings };
  };
}
