import path from 'node:path';
import type { ResolvedStage } from '../../pipeline/stage-options.js';
import type { ArtifactRef, StageResult } from '../../pipeline/stage-result.js';
import { renderTemplate } from '../../pipeline/template.js';
import { attemptBudgetCap } from '../attempt/budget-cap.js';
import { addSpending } from '../attempt/spending.js';
import { mergeWarnings } from '../attempt/warnings.js';
import { commitStageWork } from '../delivery/commit-stage-work.js';
import { customCommitMessage, stageCommitMessage } from '../delivery/stage-commit.js';
import { stageFailure } from '../failures.js';
import { FileClaims } from '../outputs/file-claims.js';
import { assemblePrompt, withTemplateErrors } from '../prompt/stage-prompt.js';
import { NestedRepositoryError } from '../workspace/nested-repositories.js';
import { collectArtifacts, type RunWorkspace } from '../workspace/run-workspace.js';
import type { AttemptRecord, AttemptSetup } from './attempt-setup.js';
import { callBackend } from './call-backend.js';
import { readAnswer } from './read-answer.js';
import { readCommandAnswer, withRenderedEnv } from './command-answer.js';
import { isCommandStage } from '../../pipeline/command-stage.js';
import { agentPipelineCommand } from '../../pipeline/shell-words.js';

/** The attempt itself: its budget cap, the prompt, the backend call, the answer read, and the commit. */
export async function runAttempt(setup: AttemptSetup): Promise<StageResult> {
  const { input, workspace, log, earlier } = setup;
  const command = isCommandStage(input.stage);
  // A command costs nothing: it runs whatever is left of the budget.
  const maxBudgetUsd = command ? undefined : attemptBudgetCap({
    stageId: input.stage.id,
    attempt: setup.info.attempt,
    stageCapUsd: input.stage.maxBudgetUsd,
    budgetRemainingUsd: input.budgetRemainingUsd,
    spentBeforeUsd: earlier.costUsd,
  });
  const baseline = await log.baseline(workspace.dir);
  const claims = new FileClaims(workspace.dir, log.dir);
  // A command has no prompt: only its `env:` is filled from the run.
  const assembled = command ? { stage: withRenderedEnv(input.stage, setup.context), prompt: { system: '', user: '' }, warnings: [] } : await assemblePrompt({
    stage: input.stage,
    baseDir: setup.filesDir,
    workspaceDir: workspace.dir,
    context: setup.context,
    contextFiles: input.pipeline.context,
    promptsDir: input.pipeline.promptsDir,
    systemPromptFile: input.pipeline.systemPrompt,
    reworkHistory: input.reworkHistory,
    maxBudgetUsd,
  });
  const { stage } = assembled;
  const transcriptPath = log.transcriptPath(setup.info.attempt);
  const outcome = await callBackend(setup, { stage, prompt: assembled.prompt, maxBudgetUsd, transcriptPath, claims });
  const collected = await collectArtifacts(workspace.dir, baseline.files);
  const record: AttemptRecord = {
    artifacts: await withoutOtherStagesFiles(collected.artifacts, workspace, stage.id, claims, baseline.takenAtMs),
    ...(collected.omitted ? { artifactsOmitted: collected.omitted } : {}),
    sessionId: outcome.sessionId,
    ...addSpending({ usage: outcome.usage, costUsd: outcome.costUsd }, earlier),
    numTurns: outcome.numTurns,
    durationMs: outcome.durationMs,
    // Earlier attempts' warnings too: a retry must not hide that attempt 1's answer was cut off.
    warnings: mergeWarnings(setup.earlierWarnings, assembled.warnings, outcome.warnings, collected.warnings),
    permissionDenials: outcome.permissionDenials,
    ...(outcome.warmStart === undefined ? {} : { warmStart: outcome.warmStart }),
    // The transcript is in the run's bookkeeping, in the worker's own folder under the workspaces root.
    transcript: path.relative(setup.deps.workspacesRoot, transcriptPath).split(path.sep).join('/'),
    // Under `isolation: stage` the run's folder, not the stage's worktree, is what people open.
    workspace: workspace.parent?.dir ?? workspace.dir,
    attempt: setup.info.attempt,
  };
  const result = command ? readCommandAnswer(stage, outcome, record, workspace.dir) : await readAnswer(setup, stage, outcome, record);
  if (result.status === 'completed' && (stage.commit || workspace.parent)) Object.assign(result, await commitWork(setup, stage, result));
  return result;
}

/**
 * A completed stage's work committed with its `commitMessage` (or the default message), and merged under isolation.
 * @throws NESTED_REPOSITORY when its worktree holds a git repository the agent made; the attempt's spending goes with it
 */
async function commitWork(setup: AttemptSetup, stage: ResolvedStage, result: StageResult): Promise<Pick<StageResult, 'commit' | 'mergeConflict'>> {
  const { input, context } = setup;
  const attempt = setup.info.attempt;
  const message = stage.commitMessage
    ? withTemplateErrors(stage.id, () => customCommitMessage(renderTemplate(stage.commitMessage!, context, `stage ${stage.id} commitMessage`, { 'stage.id': stage.id }), input.runId, stage.id, attempt))
    : stageCommitMessage(stage.id, result.summary, input.runId, attempt);
  try {
    return await commitStageWork(setup.workspace, stage.id, message, result.warnings);
  } catch (err) {
    if (!(err instanceof NestedRepositoryError)) throw err;
    throw stageFailure({
      type: 'NESTED_REPOSITORY',
      stageId: stage.id,
      message: `${err.reason} (the worktree ${setup.workspace.dir})`,
      hint: `${err.fix}; then retry the stage (\`${agentPipelineCommand('retry', input.runId, [`--stage ${stage.id}`])}\` when the run waits with onFailure: ask) or start a new run`,
      details: { folders: err.scan.folders, sessionId: result.sessionId, costUsd: result.costUsd, usage: result.usage, transcript: result.transcript, warnings: result.warnings },
    });
  }
}

/** `artifacts` less the files that only stages running alongside this one claimed (see file-claims.ts). */
async function withoutOtherStagesFiles(artifacts: ArtifactRef[], workspace: RunWorkspace, stageId: string, claims: FileClaims, sinceMs: number): Promise<ArtifactRef[]> {
  if (artifacts.length === 0) return artifacts;
  const elsewhere = await FileClaims.ofOtherStages(path.dirname(workspace.stageDir(stageId)), stageId, sinceMs);
  return artifacts.filter((artifact) => claims.has(artifact.path) || !elsewhere.has(artifact.path));
}
