import { proxyActivities, type ActivityOptions } from '@temporalio/workflow';
import type { MergeStageInput } from '../contracts/activities.js';
import { onOwner } from './run-owner.js';
import type { PipelineActivities } from '../contracts/activities.js';
import { shellWord } from '../pipeline/shell-words.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { StageResult } from '../pipeline/stage-result.js';
import type { StageRunnerContext } from './stage-runner-context.js';
import { commandsFor, type Decision } from './waits.js';


const MERGE_OPTIONS: ActivityOptions = { startToCloseTimeout: '5m', retry: { maximumAttempts: 3, initialInterval: '2s' } };
const mergeActivities = proxyActivities<PipelineActivities>(MERGE_OPTIONS);

/** How a merge conflict ended: merged (the stage goes on), skipped or otherwise decided by a person. */
export type MergeResolution = { kind: 'merged'; result: StageResult } | { kind: 'skipped' } | { kind: 'decided'; decision: Decision };

/**
 * `isolation: stage`: the stage's branch conflicted with the run's. Waits for a person, who merges it by hand in the
 * run's worktree and retries (the merge is tried again and finds it done), skips the stage's work, or cancels.
 */
export async function resolveMergeConflict(ctx: StageRunnerContext, stage: ResolvedStage, result: StageResult): Promise<MergeResolution> {
  const settings = ctx.input.pipeline.workspace!;
  let conflict = result.mergeConflict!;
  for (;;) {
    const runId = ctx.tracker.state.runId;
    const decision = await ctx.waits.waitFor(
      stage.id,
      {
        kind: 'failure',
        message:
          `${conflict.message}. Merge ${conflict.branch} in ${result.workspace} yourself (git merge ${shellWord(conflict.branch)}, fix, commit) and retry, ` +
          "or skip to leave the stage's work out of the run's branch",
        commands: commandsFor('failure', runId, stage.id),
      },
      { noFeedback: 'waits on a merge conflict: a retry merges again, with no agent' },
    );
    if (decision.kind === 'skip') return { kind: 'skipped' };
    if (decision.kind !== 'retry') return { kind: 'decided', decision };
    const merged = await mergeStage(ctx, {
      ...ctx.tracker.ref(),
      pipelineName: ctx.input.pipeline.name,
      baseDir: ctx.input.baseDir,
      inputs: ctx.input.inputs,
      workspace: settings,
      stageId: stage.id,
    });
    if (merged.kind === 'merged') return { kind: 'merged', result: { ...result, commit: merged.commit, mergeConflict: undefined } };
    conflict = { ...conflict, files: merged.files, message: merged.message };
  }
}

/** The merge runs where the run's worktree is: on its owner, or on the shared queue in runs recorded before owners. */
function mergeStage(ctx: StageRunnerContext, input: MergeStageInput) {
  const { owner } = ctx;
  if (!owner) return mergeActivities.mergeStage(input);
  return owner.run(`the merge of stage ${input.stageId}`, (claim) => proxyActivities<PipelineActivities>(onOwner(claim, MERGE_OPTIONS)).mergeStage(input));
}
