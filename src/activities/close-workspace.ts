import { activityInfo } from '@temporalio/activity';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { moveOldBookkeeping } from './workspace/old-bookkeeping.js';
import { ensureRealDir } from './workspace/own-files.js';
import { readEndedMarker, removeBookkeeping, removeRunWorkspace, writeEndedMarker } from './workspace/remove-workspace.js';
import { runPaths } from './workspace/run-folder.js';
import { openWorkerSubfolder } from './workspace/worker-folder.js';
import type { CloseWorkspaceInput, CloseWorkspaceResult } from '../contracts/activities.js';

/**
 * Creates the activity that ends a run's workspace: records that the run ended (for `agent-pipeline prune`), in the
 * run's bookkeeping folder, then removes the worktree or folder and the bookkeeping when `keep` says so: `never`
 * always, `onFailure` unless the run failed.
 */
export function createCloseWorkspace(deps: { workspacesRoot: string }) {
  return async function closeWorkspace(input: CloseWorkspaceInput): Promise<CloseWorkspaceResult> {
    const root = deps.workspacesRoot;
    const paths = runPaths(root, input);
    if (!existsSync(paths.dir) && !existsSync(paths.bookkeeping)) return { removed: false, warnings: [] };
    // A run that waited through the upgrade and ends without opening its folder again still records its end out of its tree.
    await moveOldBookkeeping(root, paths, input);
    const bookkeeping = await ensureRealDir(await openWorkerSubfolder(root, 'runs'), path.basename(paths.bookkeeping));
    const pushed = input.pushed || ((await readEndedMarker(bookkeeping))?.pushed ?? false);
    const temporalRunId = activityInfo().workflowExecution?.runId;
    await writeEndedMarker(bookkeeping, { runId: input.runId, ...(input.firstExecutionRunId === undefined ? {} : { firstExecutionRunId: input.firstExecutionRunId }), temporalRunId, status: input.status, endedAt: Date.now(), pushed });
    const remove = input.keep === 'never' || (input.keep === 'onFailure' && input.status === 'completed');
    if (!remove) return { removed: false, warnings: [] };
    const warnings = existsSync(paths.dir) ? await removeRunWorkspace(root, paths.dir, pushed) : [];
    // The bookkeeping goes only with the folder: a folder that was kept (not the run's to delete) keeps its records.
    if (!existsSync(paths.dir)) warnings.push(...(await removeBookkeeping(root, bookkeeping)));
    return { removed: !existsSync(paths.dir) && !existsSync(bookkeeping), warnings };
  };
}
