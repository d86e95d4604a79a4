import path from 'node:path';
import { DEFAULT_BRANCH_TEMPLATE, renderBranchName } from '../../pipeline/branch-name.js';
import type { RunRef } from '../../pipeline/run-state.js';
import type { PipelineDefinition } from '../../pipeline/schema.js';
import type { TemplateContext } from '../../pipeline/template.js';
import { branchDiff } from '../delivery/push.js';
import { withTemplateErrors } from '../prompt/stage-prompt.js';
import type { AllowedPaths } from './allowed-paths.js';
import { openLentFolder } from './lent-folder.js';
import { openRunWorkspace, type RunWorkspace } from './run-workspace.js';


/** Where a run's workspace is opened; the run is the `RunRef` it extends. */
export interface PipelineWorkspaceOptions extends RunRef {
  root: string;
  /** Folder of the pipeline file; `workspace.repo` is relative to it. */
  baseDir: string;
  settings: PipelineDefinition['workspace'];
  /** Renders the branch template. */
  context: TemplateContext;
  /** Who opens it, for failure messages. */
  stageId: string;
  /** Host folders a run may name (`workspace.dir`); none but the workspaces root when absent. */
  allowedPaths?: AllowedPaths;
}

/**
 * Opens the run's workspace: a plain folder, with `workspace.repo` a git worktree on the run's branch (rendered
 * from its template and sanitised into a valid git name), with `workspace.dir` the existing folder it names.
 * Idempotent.
 */
export async function openPipelineWorkspace(options: PipelineWorkspaceOptions): Promise<RunWorkspace> {
  const { settings } = options;
  if (!settings) return openRunWorkspace(options.root, options);
  if (settings.repo === undefined) {
    if (settings.dir === undefined) return openRunWorkspace(options.root, options);
    return openLentFolder({ ...options, dir: settings.dir, allowedPaths: options.allowedPaths ?? [] });
  }
  const branch = runBranch(settings, options.context, options.stageId);
  return openRunWorkspace(options.root, options, {
    stageId: options.stageId,
    git: { repo: repoOf(options.baseDir, settings), branch, base: settings.base },
  });
}

/** The run's branch: `workspace.branch` (or the default) rendered and made a valid git name. */
export function runBranch(settings: NonNullable<PipelineDefinition['workspace']>, context: TemplateContext, stageId: string): string {
  const template = settings.branch ?? DEFAULT_BRANCH_TEMPLATE;
  return withTemplateErrors(stageId, () => renderBranchName(template, context, 'workspace.branch'));
}

/** Absolute path of the pipeline's repository. */
export function repoOf(baseDir: string, settings: NonNullable<PipelineDefinition['workspace']>): string {
  if (settings.repo === undefined) throw new Error('repoOf: the pipeline has no workspace.repo (a workspace.dir run has no repository of its own)');
  return path.resolve(baseDir, settings.repo);
}

/** `{{workspace.*}}` for templates: the branch, its base and the branch's diff against the base. */
export async function workspaceVariables(workspace: RunWorkspace, baseDir: string, settings: PipelineDefinition['workspace']): Promise<TemplateContext['workspace']> {
  if (!settings?.repo || !workspace.branch) return undefined;
  const base = settings.base ?? 'HEAD';
  return { branch: workspace.branch, base, diff: await branchDiff(workspace.dir, repoOf(baseDir, settings), base) };
}
