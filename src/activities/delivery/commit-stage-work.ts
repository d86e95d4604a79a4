import type { StageResult } from '../../pipeline/stage-result.js';
import { commitStageChanges } from './stage-commit.js';
import { settleIndexLock } from '../workspace/git-index-lock.js';
import { mergeStageBranch, stageBranchOf } from '../workspace/stage-isolation.js';
import type { RunWorkspace } from '../workspace/run-workspace.js';

/**
 * Commits a completed stage's work onto the run's branch (`commit: true`, or always under `isolation: stage`, where
 * the stage's branch is then merged into the run's). The run's own delivery, the push and pull request at its end,
 * is deliver-run.ts. Never throws for git's failures (the work stays in the worktree).
 * @throws NestedRepositoryError when the worktree holds a git repository the agent made (see stage-commit.ts)
 * @param warnings the result's warnings, to which this adds
 */
export async function commitStageWork(workspace: RunWorkspace, stageId: string, message: string, warnings: string[]): Promise<Pick<StageResult, 'commit' | 'mergeConflict'>> {
  // A git the agent left at work in the worktree holds its index: the commit waits for it (or clears its stale lock).
  const lock = workspace.branch ? await settleIndexLock(workspace.dir) : undefined;
  if (lock) warnings.push(lock);
  const committed = await commitStageChanges(workspace, message);
  const run = workspace.parent;
  if (!run) {
    warnings.push(...committed.warnings);
    return { commit: committed.commit };
  }
  const branch = stageBranchOf(run.branch!, stageId);
  // The work is not on the stage's branch: merged, the branch would bring none of it, and the stage would pass without
  // its work. A person decides, as for a conflict.
  if (committed.failure) return { mergeConflict: { branch, files: [], message: `${committed.failure} (commit them there, then retry)` } };
  try {
    const merged = await mergeStageBranch(run, stageId);
    if (merged.kind === 'merged') return { commit: merged.commit };
    return { mergeConflict: { branch, files: merged.files, message: merged.message } };
  } catch (err) {
    // Not a conflict (a lock, local changes in the way): a person decides as for a conflict, with git's own words.
    return { mergeConflict: { branch, files: [], message: (err as Error).message.slice(0, 500) } };
  }
}
