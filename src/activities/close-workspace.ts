import { activityInfo } from '@temporalio/activity';
import { existsSync } from 'node:fs';
import { readEndedMarker, removeRunWorkspace, writeEndedMarker } from './workspace/remove-workspace.js';
import { runFolder } from './workspace/run-folder.js';

/** What the workflow sends when a run with `workspace.keep` has ended. */
export interface CloseWorkspaceInput {
  runId: string;
  status: 'completed' | 'failed' | 'cancelled';
  keep: 'always' | 'onFailure' | 'never';
  /** The branch was pushed (`workspace.push`), so it stays when the worktree goes. */
  pushed: boolean;
}

export interface CloseWorkspaceResult {
  removed: boolean;
  warnings: string[];
}

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
