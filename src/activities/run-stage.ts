import { activityInfo, type Info } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { StageResult } from '../pipeline/stage-result.js';
import type { StageAttemptInput } from '../contracts/stage-attempt.js';
import { AttemptLog, type AttemptFailure } from './attempt/log.js';
import { spentBefore, withEarlierSpending } from './attempt/spending.js';
import { warningsBefore, withEarlierWarnings } from './attempt/warnings.js';
import { stageFailure, withFirstDetail } from './failures.js';
import { redactSecrets } from './secrets.js';
import { gitFailure } from './workspace/git-failure.js';
import { GitError } from './workspace/git.js';
import { OwnFolderError } from './workspace/own-files.js';
import { openStageFolder } from './workspace/run-workspace.js';
import { latestHeartbeat, type AttemptSetup, type RunStageDependencies } from './run-stage/attempt-setup.js';
import { openAttemptWorkspace } from './run-stage/attempt-workspace.js';
import { runAttempt } from './run-stage/run-attempt.js';
import { toMilliseconds } from '../pipeline/duration.js';
import { mergeWarnings } from './attempt/warnings.js';
import { AttemptCheckpoints, workspaceKind } from './checkpoint/stage-checkpoints.js';
import { keepHeartbeating, markAttemptStart } from './checkpoint/keep-heartbeating.js';
import { repoOf } from './workspace/open-workspace.js';
import { storeUnavailableIn } from './store-failure.js';
import { recordRun } from '../store/run-records.js';
import { executionInfo } from './owner/stage-execution.js';

/**
 * Creates the activity that runs one attempt of one stage: workspace, prompt, backend, artifacts,
 * output contract. Every failure leaves as a catalogue `ApplicationFailure` (or the cancellation),
 * and is recorded in the stage's folder for the next attempt's `{{previous.failed}}`.
 */
export function createRunStage(deps: RunStageDependencies) {
  return async function runStage(input: StageAttemptInput): Promise<StageResult> {
    // Its setup keeps quiet until its agent's progress names the session: the first heartbeat (keep-heartbeating.ts).
    markAttemptStart();
    // In a run with an owner, the attempt counts and logs as its stage execution, which may span workers.
    const info = executionInfo(activityInfo(), input.execution);
    const stageId = input.stage.id;
    let log: AttemptLog | undefined;
    let earlier = spentBefore();
    let earlierWarnings: string[] = [];
    // Carried on a failure too: a run whose first stage fails has no result to report its workspace, and a person
    // asked to retry it (`onFailure: ask`) needs the folder to look into.
    let workspaceDir: string | undefined;
    try {
      if (input.stage.gateOnly) {
        throw stageFailure({ type: 'CONFIG_INVALID', stageId, message: 'the stage has neither `agent` nor `prompt`, so there is no agent to run', hint: 'give the stage a prompt, or let it be an approval gate only' });
      }
      // A restore, worktrees added one at a time, a lent folder's key: all before the agent's own heartbeats. The
      // previous attempt's details are kept: the session to resume is in them.
      const { context, workspace, filesDir, restoredFrom, warnings } = await keepHeartbeating(() => info.heartbeatDetails, () => openAttemptWorkspace(deps, input, info));
      workspaceDir = workspace.parent?.dir ?? workspace.dir;
      log = await AttemptLog.open(await openStageFolder(workspace, stageId, executionFolder(info, input.round)));
      const previous = { failed: log.previousFailureMessage(info.attempt, input.execution?.lastFailure?.message) };
      earlier = spentBefore(info.heartbeatDetails, log.failureBefore(info.attempt));
      earlierWarnings = warningsBefore(...log.failuresBefore(info.attempt), info.heartbeatDetails);
      const setup: AttemptSetup = { deps, input, info, filesDir, context: { ...context, previous }, workspace, log, earlier, earlierWarnings, restoredFrom };
      return redactSecrets(await runCheckpointed(setup, warnings));
    } catch (err) {
      let failure = toFailure(err, stageId);
      if (failure instanceof ApplicationFailure) failure = withEarlierWarnings(withEarlierSpending(failure, earlier), earlierWarnings);
      if (workspaceDir && failure instanceof ApplicationFailure) failure = withFirstDetail(failure, (own) => ({ ...own, workspace: workspaceDir }));
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
 * The attempt between its checkpoints: at the stage's first start (not right after a restore: the store has it),
 * every `checkpoint.every` while it runs, and at its end, whatever the outcome (see checkpoint/stage-checkpoints.ts).
 */
async function runCheckpointed(setup: AttemptSetup, setupWarnings: string[]): Promise<StageResult> {
  const { deps, input, workspace } = setup;
  const target = { runId: input.runId, firstExecutionRunId: input.firstExecutionRunId, workspacesRoot: deps.workspacesRoot, workspace: workspace.parent ?? workspace, kind: workspaceKind(input), repo: input.pipeline.workspace?.repo === undefined ? undefined : repoOf(input.baseDir, input.pipeline.workspace) };
  const everyMs = input.stage.checkpoint ? toMilliseconds(input.stage.checkpoint.every) : (deps.checkpoints?.everyMs ?? 0);
  const heartbeatDetails = () => latestHeartbeat(setup);
  const checkpoints = new AttemptCheckpoints(deps.checkpoints, target, everyMs, heartbeatDetails);
  // The store's record of a run checkpointed there, which its sweep reads once Temporal no longer keeps the run; per
  // execution, so that a later run of a reused id writes its own.
  const store = deps.checkpoints?.store;
  const { workflowNamespace: namespace, workflowExecution } = setup.info;
  if (store && namespace) await keepHeartbeating(heartbeatDetails, () => recordRun(store, { runId: input.runId, namespace }, workflowExecution?.runId));
  // An earlier attempt on this host completed the stage, but no store took its end checkpoint: only that is left to do.
  const unsaved = setup.restoredFrom ? undefined : await setup.log.takeUncheckpointedResult();
  if (unsaved) return endCheckpointed(setup, checkpoints, unsaved, setupWarnings);
  const first = setup.info.attempt === 1 && !setup.restoredFrom;
  // Round 1's first attempt is the stage's first start: its checkpoint is the one a fork from this stage starts from.
  await checkpoints.start(first, first && input.round === 1 ? input.stage.id : undefined);
  let result: StageResult | undefined;
  try {
    result = await runAttempt(setup);
  } finally {
    if (!result) await checkpoints.end();
  }
  return endCheckpointed(setup, checkpoints, result, setupWarnings);
}

/**
 * `result` once the attempt's end checkpoint holds its files. An attempt whose checkpoint no store took (after the
 * store's wait, store/waiting-store.ts) fails STORE_UNAVAILABLE, retried: the run must not go on, nor wait for a
 * person, on files that a lost host would take with it. The result is kept for the retry on this host, which writes
 * the checkpoint and returns it without running the agent again; a retry elsewhere restores the older checkpoint and
 * runs the stage again from there.
 */
async function endCheckpointed(setup: AttemptSetup, checkpoints: AttemptCheckpoints, result: StageResult, setupWarnings: string[]): Promise<StageResult> {
  const { warnings, endFailure } = await checkpoints.end();
  if (endFailure === undefined) {
    return { ...result, warnings: mergeWarnings(result.warnings, setupWarnings, warnings) };
  }
  await setup.log.keepUncheckpointedResult(result);
  throw stageFailure({
    type: 'STORE_UNAVAILABLE',
    stageId: setup.input.stage.id,
    message: `the attempt finished (${result.status}), but ${endFailure}`,
    hint: 'the next attempt writes the checkpoint and returns the stage\'s result without running it again; check AGENT_PIPELINE_STORE and its settings on the worker',
    // Its spending, so that the run's totals count it if no attempt gets the result through.
    details: { sessionId: result.sessionId, costUsd: result.costUsd, usage: result.usage, warnings: result.warnings },
  });
}

/** One folder per execution of a stage (a review round, a retry a person asked for); Temporal's attempts share it. */
function executionFolder(info: Info, round: number): string {
  const run = info.workflowExecution?.runId.slice(0, 8) ?? 'local';
  return `round-${round}-${info.activityId}-${run}`.replace(/[^A-Za-z0-9._-]/g, '_');
}

/** The cancellation as is, our failures as they are, anything else as a catalogue failure. */
function toFailure(err: unknown, stageId: string): Error {
  if (err instanceof CancelledFailure || (err instanceof Error && err.name === 'AbortError')) return err;
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof GitError) return gitFailure(err, stageId);
  // A symlink where the worker keeps its own files does not go away by retrying: a person must look.
  if (err instanceof OwnFolderError) return stageFailure({ type: 'WORKSPACE_ERROR', stageId, message: err.message, nonRetryable: true, cause: err });
  // The store down or refusing (checkpoints, claimed payloads, whole answers): retried, its message names the setting to check.
  const unavailable = storeUnavailableIn(err);
  if (unavailable) return stageFailure({ type: 'STORE_UNAVAILABLE', stageId, message: unavailable.message, cause: unavailable });
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
