import { cancellationSignal, heartbeat } from '@temporalio/activity';
import { existsSync } from 'node:fs';
import { realpath } from 'node:fs/promises';
import path from 'node:path';
import type { ResolvedStage } from '../../pipeline/stage-options.js';
import type { StageAttemptInput } from '../../contracts/stage-attempt.js';
import type { AttemptLog } from '../attempt/log.js';
import { askPersonThroughRun } from '../attempt/ask-person.js';
import { addSpending } from '../attempt/spending.js';
import { backendTraits, type AttemptProgress, type BackendOutcome, type BackendRequest } from '../backends/stage-backend.js';
import { stageFailure } from '../failures.js';
import type { FileClaims } from '../outputs/file-claims.js';
import { missingFilesContinuation, resolveOutputPath } from '../outputs/stage-outputs.js';
import { prewarmTargets } from '../prompt/prewarm-targets.js';
import type { StagePrompt } from '../prompt/stage-prompt.js';
import { checkAllowedPath, type RunPlace } from '../workspace/allowed-paths.js';
import { confirmRealFolder } from '../workspace/lent-folder.js';
import { recordLentFolder } from '../workspace/lent-records.js';
import { placeOf, type AttemptSetup, type RunStageDependencies } from './attempt-setup.js';

/** What the attempt decided before the backend runs: the stage with its agent file applied, the prompt, the cap. */
export interface BackendCall {
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
export async function callBackend(setup: AttemptSetup, call: BackendCall): Promise<BackendOutcome> {
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
  // A lent folder is used by its real path, checked when the run took it: at the moment the agent starts there, it
  // must still be that path (no folder on the way swapped for a symlink since).
  if (workspace.lent) await confirmRealFolder(workspace.dir, stage.id);
  const place = placeOf(setup.deps, input);
  const addDirs = resolveAddDirs(place, stage, setup.deps);
  // Its agent may make a repository there: never a run's `workspace.repo` after (lent-records.ts).
  for (const dir of addDirs ?? []) await recordLentFolder(place.workspacesRoot, await realpath(dir));
  return backend({
    runId: input.runId,
    stage,
    prompt: call.prompt,
    workspace,
    attempt,
    resumeSessionId: previous?.sessionId,
    continuation: (await missingFilesContinuation(stage, workspace.dir, log, attempt)) ?? continuationFor(log, attempt, input.continuation, stage.contract),
    outputPath: backendTraits(stage.backend).writesAnswerFile ? resolveOutputPath(stage, setup.context, workspace.dir) : undefined,
    maxBudgetUsd: call.maxBudgetUsd,
    mcpServers: input.pipeline.mcpServers,
    addDirs,
    transcriptPath: call.transcriptPath,
    claimFile: (file) => call.claims.add(file),
    signal: cancellationSignal(),
    // The attempt's number goes with its progress: a run whose owner died counts the dead worker's attempts on.
    heartbeat: (progress) => {
      setup.lastHeartbeat = { ...addSpending(earlierWarnings.length ? { ...progress, warnings: earlierWarnings } : progress, earlier), attempt };
      heartbeat(setup.lastHeartbeat);
    },
    askPerson: stage.onPermissionRequest === 'ask' ? askPersonThroughRun(stage.id, input.promptToken) : undefined,
    stagesFollow: (input.prewarm?.length ?? 0) > 0,
    runSignedBy: input.signedBy,
    restoredFrom: setup.restoredFrom,
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
