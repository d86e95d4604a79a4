import { cancellationSignal, Context, heartbeat, type Info } from '@temporalio/activity';
import { needIds } from '../../pipeline/graph.js';
import type { TemplateContext } from '../../pipeline/template.js';
import type { StageAttemptInput } from '../../contracts/stage-attempt.js';
import { mentionsWorkspaceVariables, readPromptTemplates } from '../prompt/workspace-variables.js';
import { stagesReadBy, withWithheldValues } from '../prompt/template-values.js';
import { openRunBundle } from '../prompt/run-bundle-files.js';
import { openPipelineWorkspace, repoOf, workspaceVariables } from '../workspace/open-workspace.js';
import { openStageWorktree } from '../workspace/stage-isolation.js';
import { checkAllowedPath } from '../workspace/allowed-paths.js';
import type { RunWorkspace } from '../workspace/run-workspace.js';
import { holdLentFolder } from '../workspace/folder-lease.js';
import { WaitReports } from '../leases/wait-reports.js';
import { placeOf, type RunStageDependencies } from './attempt-setup.js';

/**
 * The run's workspace (under `isolation: stage`, the stage's worktree in it), where the attempt reads its files from,
 * and the template variables.
 */
export async function openAttemptWorkspace(deps: RunStageDependencies, input: StageAttemptInput, info: Info): Promise<{ context: TemplateContext; workspace: RunWorkspace; filesDir: string }> {
  const stageId = input.stage.id;
  const { stage, pipeline } = input;
  // Agent, step and context files: from the run's bundle when it carries them, else from `baseDir` on this host.
  // `workspace.repo` and `addDirs` name folders on the worker's host, so they keep resolving against `baseDir`.
  const filesDir = input.bundleHash ? await openRunBundle(deps.workspacesRoot, input.bundleHash, info, stageId) : input.baseDir;
  // Read only when needed: to find the values the workflow left out that they use, and `{{workspace.…}}` in them.
  const templates = input.withheld || pipeline.workspace ? await readPromptTemplates(filesDir, stage, pipeline.systemPrompt, pipeline.promptsDir) : [];
  // The prompt shows the work of the stages it needs, so those count as read too (a join after a wide fan-out is sent
  // only some of them).
  const readsStages = [
    ...needIds(stage),
    ...stagesReadBy([...templates, stage.output, stage.commitMessage, pipeline.workspace?.branch]),
    ...(stage.inputs ?? []).flatMap((i) => (typeof i === 'object' && i.from ? [i.from] : [])),
  ];
  const given: TemplateContext = {
    inputs: input.inputs,
    stages: input.priorStages,
    run: { id: input.runId, pipeline: input.pipelineName, ...input.runEnd },
    attempt: info.attempt,
    ...(input.objectInputs?.length ? { objectInputs: input.objectInputs } : {}),
  };
  const context = await withWithheldValues(given, input.withheld, readsStages, { info, stageId });
  if (pipeline.workspace?.repo !== undefined) checkAllowedPath(deps.allowedPaths, placeOf(deps, input), repoOf(input.baseDir, pipeline.workspace), 'workspace.repo', stageId);
  // `workspace.dir` is checked against the same setting once its template is filled (lent-folder.ts).
  let workspace = await openPipelineWorkspace({ root: deps.workspacesRoot, runId: input.runId, baseDir: input.baseDir, settings: pipeline.workspace, context, stageId, allowedPaths: deps.allowedPaths });
  if (pipeline.isolation === 'stage' && pipeline.workspace?.repo !== undefined && workspace.branch) {
    workspace = await openStageWorktree(workspace, repoOf(input.baseDir, pipeline.workspace), stageId);
  }
  if (workspace.lent) await waitForLentFolder(workspace.dir, input, info);
  // `{{workspace.diff}}` costs a `git diff`, so it is computed only for stages whose templates use it; without a
  // git workspace there is nothing to compute.
  const gitWorkspace = pipeline.workspace !== undefined && workspace.branch !== undefined;
  if (gitWorkspace && mentionsWorkspaceVariables(templates)) {
    context.workspace = await workspaceVariables(workspace, input.baseDir, pipeline.workspace);
  }
  return { context, workspace, filesDir };
}

/**
 * A run in a lent folder (`workspace.dir`) takes the folder's lease before its agent may write there: while another
 * run holds it, the attempt waits, heartbeating with the details earlier attempts left (see folder-lease.ts).
 */
async function waitForLentFolder(folder: string, input: StageAttemptInput, info: Info): Promise<void> {
  const workflowId = info.workflowExecution?.workflowId ?? input.runId;
  // `status` shows the stage waiting for the folder's key, and how many runs are ahead.
  const reports = new WaitReports(workflowId, input.stage.id);
  await holdLentFolder(folder, {
    client: Context.current().client,
    taskQueue: info.taskQueue,
    workflowId,
    label: `run ${workflowId} (stage ${input.stage.id})`,
    signal: cancellationSignal(),
    onWait: (wait) => {
      heartbeat(info.heartbeatDetails);
      reports.waiting(wait);
    },
  });
  await reports.over();
}
