import { checkAllowedPath, type AllowedPaths } from './workspace/allowed-paths.js';
import { activityInfo, heartbeat } from '@temporalio/activity';
import { DELIVERY_STAGE_ID } from '../pipeline/delivery-stage.js';
import { renderTemplate, type TemplateContext } from '../pipeline/template.js';
import { stageFailure } from './failures.js';
import { pushBranch, PushError, RemoteNotConfiguredError } from './delivery/push.js';
import { openPipelineWorkspace, repoOf, workspaceVariables } from './workspace/open-workspace.js';
import { refuseLentRepository } from './workspace/lent-records.js';
import { withTemplateErrors } from './prompt/stage-prompt.js';
import { stagesReadBy, withWithheldValues } from './prompt/template-values.js';
import { openPullRequest } from './delivery/pull-request.js';
import { redactSecrets } from './secrets.js';
import type { DeliverRunInput, DeliverRunResult } from '../contracts/activities.js';

export interface DeliverRunDependencies {
  workspacesRoot: string;
  /** The worker's environment: its git credentials, `gh` and `GH_TOKEN`. */
  env: NodeJS.ProcessEnv;
  /** Host folders a run may name in `workspace.repo` besides the workspaces root. */
  allowedPaths: AllowedPaths;
}

/**
 * Creates the activity that pushes a run's branch (`workspace.push`) with the worker's git credentials and,
 * with `workspace.pullRequest`, opens the pull request.
 * @throws PUSH_FAILED (retried) when git cannot push for another reason than a rejection
 */
export function createDeliverRun(deps: DeliverRunDependencies) {
  return async function deliverRun(input: DeliverRunInput): Promise<DeliverRunResult> {
    const settings = input.workspace;
    const remote = settings.push?.remote ?? 'origin';
    checkAllowedPath(deps.allowedPaths, { workspacesRoot: deps.workspacesRoot, runId: input.runId, firstExecutionRunId: input.firstExecutionRunId, baseDir: input.baseDir }, repoOf(input.baseDir, settings), 'workspace.repo', DELIVERY_STAGE_ID);
    await refuseLentRepository(deps.workspacesRoot, repoOf(input.baseDir, settings), DELIVERY_STAGE_ID);
    const given: TemplateContext = { inputs: input.inputs, stages: input.priorStages, run: { id: input.runId, pipeline: input.pipelineName }, attempt: 1 };
    const request = settings.pullRequest;
    const templates = [settings.branch, request?.title, request?.body, request?.base];
    const context = await withWithheldValues(given, input.withheld, stagesReadBy(templates), { info: activityInfo(), stageId: DELIVERY_STAGE_ID });
    const workspace = await openPipelineWorkspace({ root: deps.workspacesRoot, runId: input.runId, firstExecutionRunId: input.firstExecutionRunId, baseDir: input.baseDir, settings, context, stageId: DELIVERY_STAGE_ID });
    const branch = workspace.branch!;
    heartbeat();
    let pushed;
    try {
      pushed = await pushBranch({ dir: workspace.dir, remote, branch, rebaseOnce: input.rebaseOnce });
    } catch (err) {
      if (err instanceof RemoteNotConfiguredError) throw stageFailure({ type: 'CONFIG_INVALID', stageId: DELIVERY_STAGE_ID, message: err.message, details: { remote, branch } });
      if (!(err instanceof PushError)) throw err;
      throw stageFailure({ type: 'PUSH_FAILED', stageId: DELIVERY_STAGE_ID, message: err.message, details: { remote, branch, stderr: err.stderr.slice(-2_000) } });
    }
    const common = { branch, remote, workspace: workspace.dir, warnings: [] as string[] };
    if (pushed.kind === 'rejected') return { ...common, status: 'rejected', message: pushed.message };
    if (pushed.kind === 'conflict') return { ...common, status: 'conflict', message: pushed.message, files: pushed.files };
    const result: DeliverRunResult = { ...common, status: 'pushed', commit: pushed.commit, rebased: pushed.rebased };
    if (pushed.rebased) result.warnings.push(`the push of ${branch} was rejected; the branch was rebased onto ${remote}/${branch} once and pushed`);
    if (request) {
      heartbeat();
      const full = { ...context, workspace: await workspaceVariables(workspace, input.baseDir, settings) };
      const render = (template: string, field: string) => withTemplateErrors(DELIVERY_STAGE_ID, () => renderTemplate(template, full, `workspace.pullRequest.${field}`));
      const opened = await openPullRequest({
        dir: workspace.dir,
        remote,
        branch,
        title: render(request.title, 'title'),
        body: render(request.body ?? '', 'body'),
        base: request.base === undefined ? undefined : render(request.base, 'base'),
        draft: request.draft ?? false,
        env: deps.env,
      });
      Object.assign(result, { pullRequestUrl: opened.url, compareUrl: opened.compareUrl });
      result.warnings.push(...opened.warnings);
    }
    return redactSecrets(result);
  };
}
