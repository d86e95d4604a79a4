import path from 'node:path';
import { renderBranchName } from '../../pipeline/branch-name.js';
import type { PipelineDefinition } from '../../pipeline/schema.js';
import type { TemplateContext } from '../../pipeline/template.js';
import { branchDiff } from '../delivery/push.js';
import { withTemplateErrors } from '../prompt/stage-prompt.js';
import { openRunWorkspace, type RunWorkspace } from './run-workspace.js';

/** The run's branch when `workspace.branch` is not set. */
export const DEFAULT_BRANCH_TEMPLATE = 'agent/{{run.id}}';

export interface PipelineWorkspaceOptions {
  root: string;
  runId: string;
  /** Folder of the pipeline file; `workspace.repo` is relative to it. */
  baseDir: string;
  settings: PipelineDefinition['workspace'];
  /** Renders the branch template. */
  context: TemplateContext;
  /** Who opens it, for failure messages. */
  stageId: string;
}

/**
 * Opens the run's workspace: a plain folder, or with `workspace.repo` a git worktree on the run's branch
 * (rendered from its template and sanitised into a valid git name). Idempotent.
 */
export async function openPipelineWorkspace(options: PipelineWorkspaceOptions): Promise<RunWorkspace> {
  const { settings } = options;
  if (!settings) return openRunWorkspace(options.root, options.runId);
  const template = settings.branch ?? DEFAULT_BRANCH_TEMPLATE;
  const branch = withTemplateErrors(options.stageId, () => renderBranchName(template, options.context, 'workspace.branch'));
  return openRunWorkspace(options.root, options.runId, {
    stageId: options.stageId,
    git: { repo: repoOf(options.baseDir, settings), branch, base: settings.base },
  });
}

/** Absolute path of the pipeline's repository. */
export function repoOf(baseDir: string, settings: NonNullable<PipelineDefinition['workspace']>): string {
  return path.resolve(baseDir, settings.repo);
}

/** `{{workspace.*}}` for templates: the branch, its base and the branch's diff against the base. */
export async function workspaceVariables(workspace: RunWorkspace, baseDir: string, settings: PipelineDefinition['workspace']): Promise<TemplateContext['workspace']> {
  if (!settings || !workspace.branch) return undefined;
  const base = settings.base ?? 'HEAD';
  return { branch: workspace.branch, base, diff: await branchDiff(workspace.dir, repoOf(baseDir, settings), base) };
}
