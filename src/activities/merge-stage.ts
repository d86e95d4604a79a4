import type { TemplateContext } from '../pipeline/template.js';
import { openPipelineWorkspace, repoOf } from './workspace/open-workspace.js';
import { mergeStageBranch, uncommittedStageWork } from './workspace/stage-isolation.js';
import type { MergeOutcome } from '../contracts/activities.js';
import { gitFailure } from './workspace/git-failure.js';
import { GitError } from './workspace/git.js';
import type { MergeStageInput } from '../contracts/activities.js';

/** Creates the activity that merges a stage's branch into the run's (`isolation: stage`), as a person's `retry` asks. */
export function createMergeStage(deps: { workspacesRoot: string }) {
  return async function mergeStage(input: MergeStageInput): Promise<MergeOutcome> {
    const context: TemplateContext = { inputs: input.inputs, stages: {}, run: { id: input.runId, pipeline: input.pipelineName }, attempt: 1 };
    const run = await openPipelineWorkspace({ root: deps.workspacesRoot, runId: input.runId, firstExecutionRunId: input.firstExecutionRunId, baseDir: input.baseDir, settings: input.workspace, context, stageId: input.stageId });
    try {
      // The stage's commit failed, or the person changed its worktree: its branch lacks that work.
      const uncommitted = await uncommittedStageWork(run, repoOf(input.baseDir, input.workspace), input.stageId);
      return uncommitted ?? (await mergeStageBranch(run, input.stageId));
    } catch (err) {
      throw err instanceof GitError ? gitFailure(err, input.stageId) : err;
    }
  };
}
