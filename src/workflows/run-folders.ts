import { patched, workflowInfo } from '@temporalio/workflow';
import type { RunState } from '../pipeline/run-state.js';

/**
 * Patch: a run names its folder, bookkeeping and checkpoints after the Temporal run id of its first execution
 * (`RunState.firstExecutionRunId`, sent with every activity that touches them), so a run started under the id of a run
 * that ended works apart from it. Before, every run of an id shared one folder: a second run found the first one's
 * files, and `logs` showed both runs' transcripts. Runs recorded before keep the folder named after the id alone.
 */
export const RUN_FOLDERS_PATCH = 'run-folders-per-execution';

/**
 * Names the run's folders, once, in the run's first task: a fresh run by its first execution's run id (a replay of a
 * run recorded before the patch keeps none). A run that continued as new takes what its state carries, the absence
 * of a name included: asked of the patch again, a run that started before it would move to a new, empty folder.
 */
export function nameRunFolders(state: RunState, continued: boolean): void {
  if (continued || !patched(RUN_FOLDERS_PATCH)) return;
  state.firstExecutionRunId = workflowInfo().firstExecutionRunId;
}
