import { activityInfo, cancellationSignal, heartbeat, type Info } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { readAgentOutput } from '../pipeline/contract.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { ArtifactRef, StageResult } from '../pipeline/stage-result.js';
import { renderTemplate, type TemplateContext, type TemplateStage } from '../pipeline/template.js';
import { AttemptLog, type AttemptFailure } from './attempt-log.js';
import { addSpending, spentBefore, withEarlierSpending, type Spending } from './attempt-spending.js';
import type { AttemptProgress, BackendOutcome, BackendRequest } from './backends/backend.js';
import { stageFailure } from './failures.js';
import { FileClaims } from './file-claims.js';
import { assemblePrompt, withTemplateErrors } from './prompt.js';
import { prewarmTargets } from './prewarm-targets.js';
import type { ReworkRound } from './prompt-compose.js';
import { checkReportedPaths } from './reported-paths.js';
import { redactSecrets } from './secrets.js';
import { commitStageWork, stageCommitMessage } from './stage-commit.js';
import { collectArtifacts, openRunWorkspace, type RunWorkspace } from './workspace.js';

/** What the workflow sends for one stage attempt. */
export interface StageAttemptInput {
  runId: string;
  pipelineName: string;
  baseDir: string;
  stage: ResolvedStage;
  inputs: Record<string, string>;
  /** Completed earlier stages, as step templates and the prompt refer to them. */
  priorStages: Record<string, TemplateStage>;
  /** Pipeline-level settings every stage shares. */
  pipeline: Pick<PipelineDefinition, 'context' | 'systemPrompt' | 'mcpServers' | 'workspace'>;
  /** Review round: 1 the first time, +1 for each rework. */
  round: number;
  /** Continue this stage's earlier session with a message: a person's answer, granted tools, rework feedback. */
  continuation?: { kind: 'answer' | 'permission' | 'rework' | 'retry'; sessionId?: string; message: string };
  /** Reviewer feedback from earlier rounds, oldest first. */
  reworkHistory?: ReworkRound[];
  /** What is left of the pipeline budget; the stage's own cap never exceeds it. @unit US dollars */
  budgetRemainingUsd?: number;
  /** Stages that become ready when this one completes, whose agents the worker may start ahead of time (warm start). */
  prewarm?: ResolvedStage[];
}

export type Backend = (request: BackendRequest) => Promise<BackendOutcome>;

export interface RunStageDependencies {
  /** Folder under which each run gets its workspace. */
  workspacesRoot: string;
  backends: Record<ResolvedStage['backend'], Backend>;
}

/** The run's branch when `workspace.branch` is not set. */
export const DEFAULT_BRANCH_TEMPLATE = 'agent/{{run.id}}';

/**
 * Creates the activity that runs one attempt of one stage: workspace, prompt, backend, artifacts,
 * output contract. Every failure leaves as a catalogue `ApplicationFailure` (or the cancellation),
 * and is recorded in the stage's folder for the next attempt's `{{previous.failed}}`.
 */
export function createRunStage(deps: RunStageDependencies) {
  return async function runStage(input: StageAttemptInput): Promise<StageResult> {
    const info = activityInfo();
    const stageId = input.stage.id;
    let log: AttemptLog | undefined;
    let earlier = spentBefore();
    try {
      if (input.stage.gateOnly) {
        throw stageFailure({ type: 'CONFIG_INVALID', stageId, message: 'the stage has neither `agent` nor `prompt`, so there is no agent to run', hint: 'give the stage a prompt, or let it be an approval gate only' });
      }
      const context: TemplateContext = {
        inputs: input.inputs,
        stages: input.priorStages,
        run: { id: input.runId, pipeline: input.pipelineName },
        attempt: info.attempt,
      };
      const workspace = await openWorkspace(deps.workspacesRoot, input, context);
      log = await AttemptLog.open(path.join(workspace.stageDir(stageId), executionFolder(info, input.round)));
      const previous = { failed: log.previousFailureMessage(info.attempt) };
      earlier = spentBefore(info.heartbeatDetails, log.failureBefore(info.attempt));
      return redactSecrets(await runAttempt(deps, input, { ...context, previous }, workspace, log, earlier));
    } catch (err) {
      let failure = toFailure(err, stageId);
      if (failure instanceof ApplicationFailure) failure = withEarlierSpending(failure, earlier);
      if (log && failure instanceof ApplicationFailure) {
        // The session lets the next attempt continue the conversation instead of starting over.
        const { sessionId, costUsd, usage } = (failure.details?.[0] ?? {}) as Partial<AttemptFailure>;
        await log.recordFailure({ attempt: info.attempt, type: failure.type ?? 'Error', message: failure.message, sessionId, costUsd, usage, at: Date.now() }).catch(() => undefined);
      }
      throw failure;
    }
  };
}

async function runAttempt(
  deps: RunStageDependencies,
  input: StageAttemptInput,
  context: TemplateContext,
  workspace: RunWorkspace,
  log: AttemptLog,
  earlier: Spending,
): Promise<StageResult> {
  const { attempt, heartbeatDetails } = activityInfo();
  const stageId = input.stage.id;
  if (input.budgetRemainingUsd !== undefined && input.budgetRemainingUsd <= 0) {
    throw stageFailure({ type: 'BUDGET_EXCEEDED', stageId, message: `the pipeline's budget is spent ($${input.budgetRemainingUsd.toFixed(2)} left) before the stage could start` });
  }
  const executionCap = minDefined(input.stage.maxBudgetUsd, input.budgetRemainingUsd);
  let maxBudgetUsd: number | undefined;
  if (executionCap !== undefined) {
    maxBudgetUsd = executionCap - earlier.costUsd;
    if (maxBudgetUsd <= 0) {
      throw stageFailure({ type: 'BUDGET_EXCEEDED', stageId, message: `the stage's earlier attempts spent $${earlier.costUsd.toFixed(2)} of its $${executionCap.toFixed(2)} cap before attempt ${attempt} could start` });
    }
  }
  const baseline = await log.baseline(workspace.dir);
  const claims = new FileClaims(workspace.dir, log.dir);
  const assembled = await assemblePrompt({
    stage: input.stage,
    baseDir: input.baseDir,
    workspaceDir: workspace.dir,
    context,
    contextFiles: input.pipeline.context,
    systemPromptFile: input.pipeline.systemPrompt,
    reworkHistory: input.reworkHistory,
    maxBudgetUsd,
  });
  const { stage } = assembled;
  const transcriptPath = log.transcriptPath(attempt);
  const previous = heartbeatDetails as AttemptProgress | undefined;
  const outcome = await deps.backends[stage.backend]({
    stage,
    prompt: assembled.prompt,
    workspace,
    attempt,
    resumeSessionId: previous?.sessionId,
    continuation: continuationFor(log, attempt, input.continuation),
    maxBudgetUsd,
    mcpServers: input.pipeline.mcpServers,
    addDirs: resolveAddDirs(input.baseDir, stage),
    transcriptPath,
    claimFile: (file) => claims.add(file),
    signal: cancellationSignal(),
    heartbeat: (progress) => heartbeat(addSpending(progress, earlier)),
    prewarm: input.prewarm?.length
      ? () =>
          prewarmTargets(input.prewarm!, {
            baseDir: input.baseDir,
            systemPromptFile: input.pipeline.systemPrompt,
            budgetRemainingUsd: input.budgetRemainingUsd,
            resolveAddDirs: (next) => resolveAddDirs(input.baseDir, next),
          })
      : undefined,
  });
  const collected = await collectArtifacts(workspace.dir, baseline.files);
  const common = {
    artifacts: await withoutOtherStagesFiles(collected.artifacts, workspace, stageId, claims, baseline.takenAtMs),
    sessionId: outcome.sessionId,
    ...addSpending({ usage: outcome.usage, costUsd: outcome.costUsd }, earlier),
    numTurns: outcome.numTurns,
    durationMs: outcome.durationMs,
    warnings: [...assembled.warnings, ...outcome.warnings, ...collected.warnings],
    permissionDenials: outcome.permissionDenials,
    ...(outcome.warmStart === undefined ? {} : { warmStart: outcome.warmStart }),
    transcript: path.relative(workspace.dir, transcriptPath),
    workspace: workspace.dir,
    attempt,
  };
  const reading = readAgentOutput(outcome.text);
  if (reading.kind === 'needs_input') {
    return { ...common, status: 'needs_input', summary: reading.question, outputs: {}, question: reading.question };
  }
  if (reading.kind === 'violation') {
    const earlierViolations = log.countFailures('OUTPUT_CONTRACT_VIOLATION');
    throw stageFailure({
      type: 'OUTPUT_CONTRACT_VIOLATION',
      stageId,
      message: `${reading.reason} (attempt ${attempt}; ${earlierViolations + 1} of ${stage.contractRetries + 1} answers allowed to break the contract)`,
      nonRetryable: earlierViolations >= stage.contractRetries,
      details: { answerTail: outcome.text.slice(-500), sessionId: outcome.sessionId, costUsd: outcome.costUsd, usage: outcome.usage, transcript: common.transcript },
    });
  }
  const { report } = reading;
  const checked = checkReportedPaths(workspace.dir, report.outputs);
  const result: StageResult = {
    ...common,
    status: report.success ? 'completed' : 'failed',
    summary: report.summary,
    outputs: checked.outputs,
    error: report.success ? undefined : (report.error ?? report.summary),
    verdict: report.verdict,
    feedback: report.feedback,
    warnings: [...common.warnings, ...checked.warnings],
  };
  if (stage.commit && report.success) {
    const committed = await commitStageWork(workspace, stageCommitMessage(stageId, report.summary, input.runId, attempt));
    result.commit = committed.commit;
    result.warnings.push(...committed.warnings);
  }
  return result;
}

/**
 * After an answer that broke the output contract, the next attempt continues the same session and
 * only asks for the report, instead of doing the work again.
 */
function continuationFor(log: AttemptLog, attempt: number, given: StageAttemptInput['continuation']): BackendRequest['continuation'] {
  const before = log.failureBefore(attempt);
  if (before?.type !== 'OUTPUT_CONTRACT_VIOLATION' || !before.sessionId) return given;
  return {
    kind: 'retry',
    sessionId: before.sessionId,
    message:
      'Your previous answer did not end with the report block the output contract requires. Do not redo the work: ' +
      'reply now with only the fenced JSON block {"success", "summary", "outputs"} that reports what you did.',
  };
}

async function openWorkspace(root: string, input: StageAttemptInput, context: TemplateContext): Promise<RunWorkspace> {
  const settings = input.pipeline.workspace;
  if (!settings) return openRunWorkspace(root, input.runId);
  const template = settings.branch ?? DEFAULT_BRANCH_TEMPLATE;
  const branch = withTemplateErrors(input.stage.id, () => renderTemplate(template, context, 'workspace.branch'));
  return openRunWorkspace(root, input.runId, {
    stageId: input.stage.id,
    git: { repo: path.resolve(input.baseDir, settings.repo), branch, base: settings.base },
  });
}

/** One folder per execution of a stage (a review round, a retry a person asked for); Temporal's attempts share it. */
function executionFolder(info: Info, round: number): string {
  const run = info.workflowExecution?.runId.slice(0, 8) ?? 'local';
  return `round-${round}-${info.activityId}-${run}`.replace(/[^A-Za-z0-9._-]/g, '_');
}

/** `addDirs` resolved against the pipeline file's folder. @throws FILE_NOT_FOUND for a folder that does not exist */
function resolveAddDirs(baseDir: string, stage: ResolvedStage): string[] | undefined {
  if (!stage.addDirs?.length) return undefined;
  return stage.addDirs.map((dir) => {
    const full = path.resolve(baseDir, dir);
    if (!existsSync(full)) {
      throw stageFailure({ type: 'FILE_NOT_FOUND', stageId: stage.id, message: `addDirs entry ${dir} (${full}) does not exist`, details: { field: 'addDirs', path: full } });
    }
    return full;
  });
}

/** `artifacts` less the files that only stages running alongside this one claimed (see file-claims.ts). */
async function withoutOtherStagesFiles(artifacts: ArtifactRef[], workspace: RunWorkspace, stageId: string, claims: FileClaims, sinceMs: number): Promise<ArtifactRef[]> {
  if (artifacts.length === 0) return artifacts;
  const elsewhere = await FileClaims.ofOtherStages(path.dirname(workspace.stageDir(stageId)), stageId, sinceMs);
  return artifacts.filter((artifact) => claims.has(artifact.path) || !elsewhere.has(artifact.path));
}

function minDefined(...values: (number | undefined)[]): number | undefined {
  const defined = values.filter((v): v is number => v !== undefined);
  return defined.length ? Math.min(...defined) : undefined;
}

/** The cancellation as is, our failures as they are, anything else as a catalogue failure. */
function toFailure(err: unknown, stageId: string): Error {
  if (err instanceof CancelledFailure || (err instanceof Error && err.name === 'AbortError')) return err;
  if (err instanceof ApplicationFailure) return err;
  const error = err instanceof Error ? err : new Error(String(err));
  const code = (error as NodeJS.ErrnoException).code;
  return stageFailure({
    type: typeof code === 'string' && /^E[A-Z]+$/.test(code) ? 'WORKSPACE_ERROR' : 'INTERNAL_ERROR',
    stageId,
    message: `the attempt failed unexpectedly: ${error.message}`,
    details: { code },
    cause: error,
  });
}
