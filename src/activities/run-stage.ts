import { activityInfo, cancellationSignal, Context, heartbeat, type Info } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { readAgentOutput, readFreeAnswer, withoutReportBlock } from '../pipeline/contract.js';
import { needIds } from '../pipeline/graph.js';
import { capText, findOversizedField, formatSize, OUTPUT_CAPS } from '../pipeline/output-caps.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { ArtifactRef, StageResult } from '../pipeline/stage-result.js';
import { renderTemplate, type TemplateContext } from '../pipeline/template.js';
import { mentionsWorkspaceVariables, readPromptTemplates } from './prompt/workspace-variables.js';
import { stagesReadBy, withWithheldValues } from './prompt/template-values.js';
import type { StageAttemptInput } from '../contracts/stage-attempt.js';
import { openPipelineWorkspace, repoOf, workspaceVariables } from './workspace/open-workspace.js';
import { commitStageWork } from './delivery/commit-stage-work.js';
import { openStageWorktree } from './workspace/stage-isolation.js';
import { AttemptLog, type AttemptFailure } from './attempt/log.js';
import { askPersonThroughRun } from './attempt/ask-person.js';
import { attemptBudgetCap } from './attempt/budget-cap.js';
import { addSpending, spentBefore, withEarlierSpending, type Spending } from './attempt/spending.js';
import { mergeWarnings, warningsBefore, withEarlierWarnings } from './attempt/warnings.js';
import { backendTraits, type AttemptProgress, type BackendOutcome, type BackendRequest, type StageBackend } from './backends/stage-backend.js';
import { stageFailure } from './failures.js';
import { FileClaims } from './outputs/file-claims.js';
import { removeStaleIndexLock } from './workspace/git-index-lock.js';
import { assemblePrompt, withTemplateErrors, type StagePrompt } from './prompt/stage-prompt.js';
import { prewarmTargets } from './prompt/prewarm-targets.js';
import { checkReportedPaths } from './outputs/reported-paths.js';
import { openRunBundle } from './prompt/run-bundle-files.js';
import { redactSecrets } from './secrets.js';
import { customCommitMessage, stageCommitMessage } from './delivery/stage-commit.js';
import { checkExpectedFiles, missingFilesContinuation, resolveOutputPath } from './outputs/stage-outputs.js';
import { checkAllowedPath, type RunPlace, type AllowedPaths } from './workspace/allowed-paths.js';
import { collectArtifacts, type RunWorkspace } from './workspace/run-workspace.js';
import { holdLentFolder } from './workspace/folder-lease.js';
import { WaitReports } from './leases/wait-reports.js';
import { gitFailure } from './workspace/git-failure.js';
import { GitError } from './workspace/git.js';

export interface RunStageDependencies {
  /** Folder under which each run gets its workspace. */
  workspacesRoot: string;
  /** The built-in backends and any the worker was given, by the name a stage's `backend:` selects. */
  backends: Record<string, StageBackend>;
  /** Host folders a run may name in `workspace.repo`, `workspace.dir` and `addDirs` besides the workspaces root. */
  allowedPaths: AllowedPaths;
}

export { DEFAULT_BRANCH_TEMPLATE } from './workspace/open-workspace.js';

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
    let earlierWarnings: string[] = [];
    try {
      if (input.stage.gateOnly) {
        throw stageFailure({ type: 'CONFIG_INVALID', stageId, message: 'the stage has neither `agent` nor `prompt`, so there is no agent to run', hint: 'give the stage a prompt, or let it be an approval gate only' });
      }
      const { context, workspace, filesDir } = await openAttemptWorkspace(deps, input, info);
      log = await AttemptLog.open(path.join(workspace.stageDir(stageId), executionFolder(info, input.round)));
      const previous = { failed: log.previousFailureMessage(info.attempt) };
      earlier = spentBefore(info.heartbeatDetails, log.failureBefore(info.attempt));
      earlierWarnings = warningsBefore(...log.failuresBefore(info.attempt), info.heartbeatDetails);
      const setup: AttemptSetup = { deps, input, info, filesDir, context: { ...context, previous }, workspace, log, earlier, earlierWarnings };
      return redactSecrets(await runAttempt(setup));
    } catch (err) {
      let failure = toFailure(err, stageId);
      if (failure instanceof ApplicationFailure) failure = withEarlierWarnings(withEarlierSpending(failure, earlier), earlierWarnings);
      if (log && failure instanceof ApplicationFailure) {
        // The session lets the next attempt continue the conversation instead of starting over.
        const { sessionId, costUsd, usage, warnings } = (failure.details?.[0] ?? {}) as Partial<AttemptFailure>;
        await log.recordFailure({ attempt: info.attempt, type: failure.type ?? 'Error', message: failure.message, sessionId, costUsd, usage, warnings, at: Date.now() }).catch(() => undefined);
      }
      throw failure;
    }
  };
}

/**
 * The run's workspace (under `isolation: stage`, the stage's worktree in it), where the attempt reads its files from,
 * and the template variables.
 */
async function openAttemptWorkspace(deps: RunStageDependencies, input: StageAttemptInput, info: Info): Promise<{ context: TemplateContext; workspace: RunWorkspace; filesDir: string }> {
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
  if (workspace.runFolder !== undefined) await waitForLentFolder(workspace.dir, input, info);
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

/** One attempt as `runStage` prepared it: its workspace open, its log read. */
interface AttemptSetup {
  deps: RunStageDependencies;
  input: StageAttemptInput;
  info: Info;
  /** Where agent, step and context files are read: the run's bundle, else `baseDir`. */
  filesDir: string;
  context: TemplateContext;
  workspace: RunWorkspace;
  log: AttemptLog;
  /** What the execution's earlier attempts spent, and the warnings they gave. */
  earlier: Spending;
  earlierWarnings: string[];
}

/** What the agent did, before its answer is read: the fields every stage result has. */
type AttemptRecord = Omit<StageResult, 'status' | 'summary' | 'outputs'>;

/** The attempt itself: its budget cap, the prompt, the backend call, the answer read, and the commit. */
async function runAttempt(setup: AttemptSetup): Promise<StageResult> {
  const { input, workspace, log, earlier } = setup;
  const maxBudgetUsd = attemptBudgetCap({
    stageId: input.stage.id,
    attempt: setup.info.attempt,
    stageCapUsd: input.stage.maxBudgetUsd,
    budgetRemainingUsd: input.budgetRemainingUsd,
    spentBeforeUsd: earlier.costUsd,
  });
  // Before the agent needs git: a lock left by a git that was killed outright would fail every git command.
  // Only in the run's own worktree: a lent folder's git is its owner's (who may be running git in it right now).
  const staleLock = input.pipeline.workspace?.repo !== undefined ? await removeStaleIndexLock(workspace.dir) : undefined;
  const baseline = await log.baseline(workspace.dir);
  const claims = new FileClaims(workspace.dir, log.dir);
  const assembled = await assemblePrompt({
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
    warnings: mergeWarnings(setup.earlierWarnings, staleLock ? [staleLock] : [], assembled.warnings, outcome.warnings, collected.warnings),
    permissionDenials: outcome.permissionDenials,
    ...(outcome.warmStart === undefined ? {} : { warmStart: outcome.warmStart }),
    // Under `isolation: stage` the run's folder, not the stage's worktree inside it, is what people open; with
    // `workspace.dir` the transcript is in the run's own folder, not in the lent one.
    transcript: path.relative(workspace.runFolder ?? workspace.parent?.dir ?? workspace.dir, transcriptPath),
    workspace: workspace.parent?.dir ?? workspace.dir,
    attempt: setup.info.attempt,
  };
  const result = await readAnswer(setup, stage, outcome, record);
  if (result.status === 'completed' && (stage.commit || workspace.parent)) Object.assign(result, await commitWork(setup, stage, result));
  return result;
}

/** What the attempt decided before the backend runs: the stage with its agent file applied, the prompt, the cap. */
interface BackendCall {
  stage: ResolvedStage;
  prompt: StagePrompt;
  /** @unit US dollars */
  maxBudgetUsd?: number;
  transcriptPath: string;
  claims: FileClaims;
}

/**
 * Runs the backend the stage selects on one request.
 * @throws CONFIG_INVALID when this worker has no such backend; whatever the backend throws
 */
async function callBackend(setup: AttemptSetup, call: BackendCall): Promise<BackendOutcome> {
  const { deps, input, workspace, log, earlier, earlierWarnings } = setup;
  const { stage } = call;
  const attempt = setup.info.attempt;
  const backend = Object.hasOwn(deps.backends, stage.backend) ? deps.backends[stage.backend] : undefined;
  if (!backend) {
    throw stageFailure({
      type: 'CONFIG_INVALID',
      stageId: stage.id,
      message: `this worker has no backend "${stage.backend}" (it has ${Object.keys(deps.backends).join(', ')})`,
      hint: 'register it with createPipelineWorker({ backends }) on every worker of the task queue, or pick another backend',
    });
  }
  const previous = setup.info.heartbeatDetails as AttemptProgress | undefined;
  return backend({
    stage,
    prompt: call.prompt,
    workspace,
    attempt,
    resumeSessionId: previous?.sessionId,
    continuation: (await missingFilesContinuation(stage, workspace.dir, log, attempt)) ?? continuationFor(log, attempt, input.continuation, stage.contract),
    outputPath: backendTraits(stage.backend).writesAnswerFile ? resolveOutputPath(stage, setup.context, workspace.dir) : undefined,
    maxBudgetUsd: call.maxBudgetUsd,
    mcpServers: input.pipeline.mcpServers,
    addDirs: resolveAddDirs(placeOf(setup.deps, input), stage, setup.deps),
    transcriptPath: call.transcriptPath,
    claimFile: (file) => call.claims.add(file),
    signal: cancellationSignal(),
    heartbeat: (progress) => heartbeat(addSpending(earlierWarnings.length ? { ...progress, warnings: earlierWarnings } : progress, earlier)),
    askPerson: stage.onPermissionRequest === 'ask' ? askPersonThroughRun(stage.id) : undefined,
    stagesFollow: (input.prewarm?.length ?? 0) > 0,
    prewarm: input.prewarm?.length
      ? () =>
          prewarmTargets(input.prewarm!, {
            baseDir: setup.filesDir,
            systemPromptFile: input.pipeline.systemPrompt,
            budgetRemainingUsd: input.budgetRemainingUsd,
            resolveAddDirs: (next) => resolveAddDirs(placeOf(setup.deps, input), next, setup.deps),
          })
      : undefined,
  });
}

/**
 * The stage result the agent's answer makes: its question, or its report with the files it names checked.
 * @throws OUTPUT_CONTRACT_VIOLATION for an answer without a valid report; OUTPUT_MISSING for files `expects:` names
 */
async function readAnswer(setup: AttemptSetup, stage: ResolvedStage, outcome: BackendOutcome, record: AttemptRecord): Promise<StageResult> {
  const { workspace, log } = setup;
  const attempt = setup.info.attempt;
  failIfEmptyIsFinal(stage, outcome, record);
  const reading = stage.contract === 'none' ? readFreeAnswer(outcome.text) : readAgentOutput(outcome.text);
  const answer = capProse('text', withoutReportBlock(outcome.text).trimEnd(), record.warnings, OUTPUT_CAPS.answerBytes);
  if (reading.kind === 'needs_input') {
    const question = capProse('question', reading.question, record.warnings);
    return { ...record, status: 'needs_input', summary: question, outputs: {}, question, answer, ...(reading.blocked ? { blocked: true } : {}) };
  }
  if (reading.kind === 'violation') {
    const earlierViolations = log.countFailures('OUTPUT_CONTRACT_VIOLATION');
    throw stageFailure({
      type: 'OUTPUT_CONTRACT_VIOLATION',
      stageId: stage.id,
      message: `${reading.reason} (attempt ${attempt}; ${earlierViolations + 1} of ${stage.contractRetries + 1} answers allowed to break the contract)`,
      nonRetryable: earlierViolations >= stage.contractRetries,
      details: { answerTail: outcome.text.slice(-500), sessionId: outcome.sessionId, costUsd: outcome.costUsd, usage: outcome.usage, transcript: record.transcript, warnings: record.warnings },
    });
  }
  const { report, extra } = reading;
  const oversized = findOversizedField(report, extra);
  if (oversized) {
    throw stageFailure({
      type: 'OUTPUT_TOO_LARGE',
      stageId: stage.id,
      message: `the answer's \`${oversized.field}\` is ${formatSize(oversized.bytes)} (${oversized.bytes} bytes), over its limit of ${formatSize(oversized.limit)}`,
      details: { sessionId: outcome.sessionId, costUsd: outcome.costUsd, usage: outcome.usage, transcript: record.transcript, warnings: record.warnings },
    });
  }
  if (report.success) await checkExpectedFiles(stage, workspace.dir, log, { attempt, sessionId: outcome.sessionId, costUsd: outcome.costUsd, usage: outcome.usage, transcript: record.transcript });
  const checked = checkReportedPaths(workspace.dir, report.outputs);
  return {
    ...record,
    status: report.success ? 'completed' : 'failed',
    summary: capProse('summary', report.summary, checked.warnings),
    outputs: checked.outputs,
    error: report.success ? undefined : capProse('error', report.error ?? report.summary, checked.warnings),
    verdict: report.verdict,
    feedback: report.feedback,
    answer,
    ...(extra ? { report: extra } : {}),
    warnings: [...record.warnings, ...checked.warnings],
  };
}

/** An empty answer fails RESPONSE_EMPTY at once when the stage's `retry.nonRetryable` lists it, whatever the backend. */
function failIfEmptyIsFinal(stage: ResolvedStage, outcome: BackendOutcome, record: AttemptRecord): void {
  if (outcome.text.trim() === '' && stage.retry?.nonRetryable?.includes('RESPONSE_EMPTY')) {
    // The stage said an empty answer is final (the API backend throws RESPONSE_EMPTY itself; the CLI's empty answer
    // would otherwise be a contract violation, asked again in the same session).
    throw stageFailure({
      type: 'RESPONSE_EMPTY',
      stageId: stage.id,
      message: 'the agent gave no answer, and the stage\'s `retry.nonRetryable` lists RESPONSE_EMPTY',
      nonRetryable: true,
      hint: 'check the prompt and the model; remove RESPONSE_EMPTY from `retry.nonRetryable` to have an empty answer retried',
      details: { sessionId: outcome.sessionId, costUsd: outcome.costUsd, usage: outcome.usage, transcript: record.transcript, warnings: record.warnings },
    });
  }
}

/** Prose a person reads, cut to its cap; the cut is told in `warnings` (the full text stays in the transcript). */
function capProse(field: string, text: string, warnings: string[], limit: number = OUTPUT_CAPS.summaryBytes): string {
  const capped = capText(text, limit);
  if (capped.cut) warnings.push(`the answer's ${field} was ${formatSize(capped.bytes)}, over its limit of ${formatSize(limit)}; it was cut (the full text is in the transcript)`);
  return capped.text;
}

/** A completed stage's work committed with its `commitMessage` (or the default message), and merged under isolation. */
async function commitWork(setup: AttemptSetup, stage: ResolvedStage, result: StageResult): Promise<Pick<StageResult, 'commit' | 'mergeConflict'>> {
  const { input, context } = setup;
  const attempt = setup.info.attempt;
  const message = stage.commitMessage
    ? withTemplateErrors(stage.id, () => customCommitMessage(renderTemplate(stage.commitMessage!, context, `stage ${stage.id} commitMessage`, { 'stage.id': stage.id }), input.runId, stage.id, attempt))
    : stageCommitMessage(stage.id, result.summary, input.runId, attempt);
  return commitStageWork(setup.workspace, stage.id, message, result.warnings);
}

/**
 * After an answer that broke the output contract, the next attempt continues the same session and
 * only asks for the report, instead of doing the work again.
 */
function continuationFor(log: AttemptLog, attempt: number, given: StageAttemptInput['continuation'], contract: ResolvedStage['contract']): BackendRequest['continuation'] {
  const before = log.failureBefore(attempt);
  if (before?.type !== 'OUTPUT_CONTRACT_VIOLATION' || !before.sessionId) return given;
  // Under `contract: none` the only violation is an empty answer: ask for the answer, not for a report block.
  if (contract === 'none') {
    return { kind: 'retry', sessionId: before.sessionId, message: 'Your previous answer was empty. Do not redo the work: reply now with your answer in full, ending with a short paragraph that sums up what you did.' };
  }
  return {
    kind: 'retry',
    sessionId: before.sessionId,
    message:
      'Your previous answer did not end with the report block the output contract requires. Do not redo the work: ' +
      'reply now with only the fenced JSON block {"success", "summary", "outputs"} that reports what you did.',
  };
}

/** One folder per execution of a stage (a review round, a retry a person asked for); Temporal's attempts share it. */
function executionFolder(info: Info, round: number): string {
  const run = info.workflowExecution?.runId.slice(0, 8) ?? 'local';
  return `round-${round}-${info.activityId}-${run}`.replace(/[^A-Za-z0-9._-]/g, '_');
}

/** Where a run lives, for {@link checkAllowedPath}. */
function placeOf(deps: Pick<RunStageDependencies, 'workspacesRoot'>, input: { runId: string; baseDir: string }): RunPlace {
  return { workspacesRoot: deps.workspacesRoot, runId: input.runId, baseDir: input.baseDir };
}

/** `addDirs` resolved against the pipeline file's folder. @throws FILE_NOT_FOUND for a folder that does not exist */
function resolveAddDirs(place: RunPlace, stage: ResolvedStage, deps: Pick<RunStageDependencies, 'allowedPaths'>): string[] | undefined {
  if (!stage.addDirs?.length) return undefined;
  return stage.addDirs.map((dir) => {
    const full = path.resolve(place.baseDir, dir);
    checkAllowedPath(deps.allowedPaths, place, full, 'addDirs', stage.id);
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

/** The cancellation as is, our failures as they are, anything else as a catalogue failure. */
function toFailure(err: unknown, stageId: string): Error {
  if (err instanceof CancelledFailure || (err instanceof Error && err.name === 'AbortError')) return err;
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof GitError) return gitFailure(err, stageId);
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
