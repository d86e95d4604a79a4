import { cancellationSignal, Context, type Info } from '@temporalio/activity';
import { realpath } from 'node:fs/promises';
import { needIds } from '../../pipeline/graph.js';
import type { TemplateContext } from '../../pipeline/template.js';
import type { StageAttemptInput } from '../../contracts/stage-attempt.js';
import { mentionsWorkspaceVariables, readPromptTemplates } from '../prompt/workspace-variables.js';
import { stagesReadBy, withWithheldValues } from '../prompt/template-values.js';
import { openRunBundle } from '../prompt/run-bundle-files.js';
import { openWorkerPipelineFolder } from '../prompt/worker-files.js';
import { openPipelineWorkspace, repoOf, runBranch, workspaceVariables } from '../workspace/open-workspace.js';
import { restoreForAttempt } from '../checkpoint/stage-checkpoints.js';
import { openStageWorktree } from '../workspace/stage-isolation.js';
import { removeStaleIndexLock } from '../workspace/git-index-lock.js';
import { withLock } from '../workspace/keyed-lock.js';
import { checkAllowedPath } from '../workspace/allowed-paths.js';
import type { RunWorkspace } from '../workspace/run-workspace.js';
import { holdLentFolder, runHolder, type FolderWait } from '../workspace/folder-lease.js';
import { claimFolderNesting } from '../workspace/folder-nesting.js';
import { recheckLentFolder } from '../workspace/lent-folder.js';
import { refuseLentRepository } from '../workspace/lent-records.js';
import { WaitReports } from '../leases/wait-reports.js';
import { placeOf, type RunStageDependencies } from './attempt-setup.js';

/** What {@link openAttemptWorkspace} opened. */
export interface AttemptWorkspace {
  context: TemplateContext;
  workspace: RunWorkspace;
  filesDir: string;
  /** The checkpoint this host's copy of the run was restored from, when the attempt is to be told (stage-checkpoints.ts). */
  restoredFrom?: { id: string; takenAt: string };
  /** For the stage's result: what the restore and the stale-lock removal said. */
  warnings: string[];
}

/**
 * The run's workspace (under `isolation: stage`, the stage's worktree in it), where the attempt reads its files from,
 * and the template variables.
 */
export async function openAttemptWorkspace(deps: RunStageDependencies, input: StageAttemptInput, info: Info): Promise<AttemptWorkspace> {
  const stageId = input.stage.id;
  const { stage, pipeline } = input;
  // Agent, step and context files: from the run's bundle when it carries them, else from `baseDir` on this host, only
  // inside a folder the worker lists. Either way by its real path, which every read checks again (pipeline-file.ts).
  // `workspace.repo` and `addDirs` name folders on the worker's host, so they keep resolving against `baseDir`.
  const filesDir = input.bundleHash
    ? await realpath(await openRunBundle(deps.workspacesRoot, input.bundleHash, info, stageId))
    : await openWorkerPipelineFolder(deps.pipelineDirs, input.baseDir, stageId);
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
  if (pipeline.workspace?.repo !== undefined) {
    checkAllowedPath(deps.allowedPaths, placeOf(deps, input), repoOf(input.baseDir, pipeline.workspace), 'workspace.repo', stageId);
    await refuseLentRepository(deps.workspacesRoot, repoOf(input.baseDir, pipeline.workspace), stageId);
  }
  // `workspace.dir` is checked against the same setting once its template is filled (lent-folder.ts).
  // A host without the run's workspace (or with an older copy) gets it back from the run's last checkpoint first.
  const branch = pipeline.workspace?.repo === undefined ? undefined : runBranch(pipeline.workspace, context, stageId);
  const open = () => openPipelineWorkspace({ root: deps.workspacesRoot, runId: input.runId, firstExecutionRunId: input.firstExecutionRunId, baseDir: input.baseDir, settings: pipeline.workspace, context, stageId, allowedPaths: deps.allowedPaths });
  const firstStart = info.attempt === 1 && input.round === 1 && input.continuation === undefined;
  const restored = await restoreForAttempt(deps.checkpoints, { input, workspacesRoot: deps.workspacesRoot, branch, firstStart, open, signal: cancellationSignal() });
  let workspace = await open();
  const warnings: string[] = [];
  // Before any git of the attempt: a lock left by a git that was killed outright would fail every git command there.
  // Only in the run's own worktrees: a lent folder's git is its owner's (who may be running git in it right now). Not
  // while this process runs a git there (another stage's merge): git closes its lock before renaming it into place.
  if (pipeline.workspace?.repo !== undefined) {
    const run = workspace;
    const staleLock = await withLock(run.dir, () => removeStaleIndexLock(run.dir));
    if (staleLock) warnings.push(staleLock);
  }
  if (pipeline.isolation === 'stage' && pipeline.workspace?.repo !== undefined && workspace.branch) {
    workspace = await openStageWorktree(workspace, repoOf(input.baseDir, pipeline.workspace), stageId, (warning) => warnings.push(warning));
  }
  if (workspace.lent) {
    await waitForLentFolder(workspace.dir, input, info, pipeline.workspace?.shared === true);
    // Checked again now that the run holds it: while it waited, the folder (or one above it) may have been replaced by
    // a symlink leading elsewhere. The agent starts in the real path checked, never in what the name leads to now.
    const lent = { root: deps.workspacesRoot, runId: input.runId, firstExecutionRunId: input.firstExecutionRunId, dir: pipeline.workspace!.dir!, baseDir: input.baseDir, context, allowedPaths: deps.allowedPaths, stageId };
    await recheckLentFolder(lent, workspace.dir);
  }
  // `{{workspace.diff}}` costs a `git diff`, so it is computed only for stages whose templates use it; without a
  // git workspace there is nothing to compute.
  const gitWorkspace = pipeline.workspace !== undefined && workspace.branch !== undefined;
  if (gitWorkspace && mentionsWorkspaceVariables(templates)) {
    context.workspace = await workspaceVariables(workspace, input.baseDir, pipeline.workspace);
  }
  const restoredFrom = restored && { id: restored.id, takenAt: restored.takenAt };
  return { context, workspace, filesDir, restoredFrom, warnings: [...(restored?.warnings ?? []), ...warnings] };
}

/**
 * A run in a lent folder (`workspace.dir`) takes the folder's lease before its agent may write there: while another
 * run holds it, the attempt waits (heartbeating as all of the attempt's setup does: run-stage.ts; see folder-lease.ts).
 */
async function waitForLentFolder(folder: string, input: StageAttemptInput, info: Info, shared: boolean): Promise<void> {
  const workflowId = info.workflowExecution?.workflowId ?? input.runId;
  // `status` shows the stage waiting for the folder's key (or the key of a folder around or inside it), and how many
  // runs are ahead.
  const reports = new WaitReports(workflowId, input.stage.id);
  const options = {
    client: Context.current().client,
    taskQueue: info.taskQueue,
    workflowId,
    label: `run ${workflowId} (stage ${input.stage.id})`,
    signal: cancellationSignal(),
    onWait: (wait: FolderWait) => reports.waiting(wait),
  };
  // A run that shares the folder takes no key of its own for it: it joins the shared key once the nesting check passes.
  if (!shared) await holdLentFolder(folder, options);
  // Then no other run may hold a folder inside or around it, nor (shared or not) be in it the other way (folder-nesting.ts).
  const attemptHolder = `${workflowId}/${info.activityId}/${info.attempt}`;
  await claimFolderNesting(folder, { ...options, holder: runHolder(workflowId), attemptHolder, shared });
  await reports.over();
}
