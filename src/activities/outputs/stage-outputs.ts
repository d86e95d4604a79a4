import path from 'node:path';
import type { ResolvedStage } from '../../pipeline/stage-options.js';
import { renderTemplate, type TemplateContext } from '../../pipeline/template.js';
import type { AttemptLog } from '../attempt/log.js';
import type { BackendRequest } from '../backends/stage-backend.js';
import { findMissingExpected, missingFilesMessage, OutsideWorkspaceError } from './expected-files.js';
import { stageFailure } from '../failures.js';
import { withTemplateErrors } from '../prompt/stage-prompt.js';
import { resolveInside } from '../../files/inside.js';
import { workspacePath } from '../workspace/run-workspace.js';

/*
 * What a stage must produce besides its answer: the answer file of a backend that writes one (the API backend's,
 * `output:`) and the files `expects:` names.
 */

/** Where the answer file lands when the stage sets no `output:`. */
export function defaultOutputPath(stageId: string): string {
  return `outputs/${stageId}.md`;
}

/**
 * The stage's `output:` template rendered (`outputs/{{inputs.squad}}/{{stage.id}}.md`), workspace-relative.
 * @throws TEMPLATE_VARIABLE_UNKNOWN; CONFIG_INVALID for a path outside the workspace
 */
export function resolveOutputPath(stage: ResolvedStage, context: TemplateContext, workspaceDir: string): string {
  if (!stage.output) return defaultOutputPath(stage.id);
  const rendered = withTemplateErrors(stage.id, () => renderTemplate(stage.output!, context, `stage ${stage.id} output`, { 'stage.id': stage.id })).trim();
  const full = resolveInside(workspaceDir, rendered);
  if (!full || full === path.resolve(workspaceDir)) {
    throw stageFailure({
      type: 'CONFIG_INVALID',
      stageId: stage.id,
      message: `output ${rendered} (from \`output: ${stage.output}\`) is not a file inside the run's workspace ${workspaceDir}`,
      hint: 'use a workspace-relative file path such as outputs/{{stage.id}}.md',
      details: { field: 'output', path: rendered },
    });
  }
  return workspacePath(workspaceDir, full);
}

/**
 * Fails the attempt with OUTPUT_MISSING when files `expects:` names are not in the workspace. The first time
 * it is retryable: the next attempt continues the session and asks only for the missing files.
 */
export async function checkExpectedFiles(
  stage: ResolvedStage,
  workspaceDir: string,
  log: AttemptLog,
  facts: { attempt: number; sessionId?: string; costUsd: number | null; usage: unknown; transcript?: string },
): Promise<void> {
  if (!stage.expects?.length) return;
  const missing = await expectedMissing(stage, workspaceDir);
  if (missing.length === 0) return;
  const earlier = log.countFailures('OUTPUT_MISSING');
  throw stageFailure({
    type: 'OUTPUT_MISSING',
    stageId: stage.id,
    message: `the stage did not write ${missing.join(', ')} (expects: ${stage.expects.join(', ')}; attempt ${facts.attempt}${earlier === 0 ? ', asking the agent once more' : ', already asked once'})`,
    nonRetryable: earlier >= 1,
    details: { missing, sessionId: facts.sessionId, costUsd: facts.costUsd, usage: facts.usage, transcript: facts.transcript },
  });
}

/**
 * After OUTPUT_MISSING, the next attempt continues the same session with "you did not write X" instead of
 * doing the work again. Undefined when the previous attempt failed otherwise, or the files are there by now.
 */
export async function missingFilesContinuation(stage: ResolvedStage, workspaceDir: string, log: AttemptLog, attempt: number): Promise<BackendRequest['continuation']> {
  const before = log.failureBefore(attempt);
  if (before?.type !== 'OUTPUT_MISSING' || !before.sessionId || !stage.expects?.length) return undefined;
  const missing = await expectedMissing(stage, workspaceDir);
  if (missing.length === 0) return undefined;
  return { kind: 'retry', sessionId: before.sessionId, message: missingFilesMessage(missing) };
}

async function expectedMissing(stage: ResolvedStage, workspaceDir: string): Promise<string[]> {
  try {
    return await findMissingExpected(workspaceDir, stage.expects ?? []);
  } catch (err) {
    if (!(err instanceof OutsideWorkspaceError)) throw err;
    throw stageFailure({ type: 'CONFIG_INVALID', stageId: stage.id, message: err.message, details: { field: 'expects', path: err.pattern } });
  }
}
