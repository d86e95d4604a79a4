import { DEFAULT_BRANCH_TEMPLATE, renderBranchName } from './branch-name.js';
import type { ForkProblem } from './fork-plan.js';
import type { PipelineDefinition } from './schema.js';

/*
 * A fork of a git run works on a branch of its own (docs/forking.md): it must never take over, move or push the
 * source run's branch. `workspace.branch` is a template; one that names neither the run (`{{run.id}}`) nor an input
 * the fork changes renders the same name for both runs. Pure: the client refuses such a fork before it starts, the
 * worker again before it lays out the fork's workspace.
 */

/** One run as its branch is rendered: its id, its pipeline and its inputs. */
export interface BranchSide {
  runId: string;
  pipeline: PipelineDefinition;
  inputs: Record<string, string>;
}

/** Why the fork `fork` of run `source` would work on the source's own branch, or undefined when it would not. */
export function findSharedBranchProblem(source: BranchSide, fork: BranchSide): ForkProblem | undefined {
  if (source.pipeline.workspace?.repo === undefined || fork.pipeline.workspace?.repo === undefined) return undefined;
  const theirs = branchOf(source);
  const ours = branchOf(fork);
  if (theirs === undefined || theirs !== ours) return undefined;
  const template = fork.pipeline.workspace.branch ?? DEFAULT_BRANCH_TEMPLATE;
  return {
    message: `the fork's branch would be ${ours}, the branch of run ${source.runId}: workspace.branch ${JSON.stringify(template)} gives both runs the same name, so the fork would work on the source's branch (and push it)`,
    fix: 'put {{run.id}} in workspace.branch (its default is agent/{{run.id}}), or change with --input an input the branch name uses',
  };
}

/** The branch a run's workspace gets, or undefined when its template cannot be rendered here (the run says why). */
function branchOf({ runId, pipeline, inputs }: BranchSide): string | undefined {
  const context = { inputs, stages: {}, run: { id: runId, pipeline: pipeline.name }, attempt: 1 };
  try {
    return renderBranchName(pipeline.workspace?.branch ?? DEFAULT_BRANCH_TEMPLATE, context);
  } catch {
    return undefined;
  }
}
