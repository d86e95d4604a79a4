import { readAgentOutput, readFreeAnswer, withoutReportBlock } from '../../pipeline/contract.js';
import { capText, findOversizedField, formatSize, OUTPUT_CAPS } from '../../pipeline/output-caps.js';
import type { ResolvedStage } from '../../pipeline/stage-options.js';
import type { StageResult } from '../../pipeline/stage-result.js';
import type { BackendOutcome } from '../backends/stage-backend.js';
import { FINAL_EMPTY_ANSWER_HINT, stageFailure } from '../failures.js';
import { checkReportedPaths } from '../outputs/reported-paths.js';
import { checkExpectedFiles } from '../outputs/stage-outputs.js';
import { keepHeartbeating } from '../checkpoint/keep-heartbeating.js';
import { keepFinalAnswer, type FinalAnswerPlace } from './final-answer.js';
import { latestHeartbeat, type AttemptRecord, type AttemptSetup } from './attempt-setup.js';

/**
 * The stage result the agent's answer makes: its question, or its report with the files it names checked.
 * @throws OUTPUT_CONTRACT_VIOLATION for an answer without a valid report; OUTPUT_MISSING for files `expects:` names
 */
export async function readAnswer(setup: AttemptSetup, stage: ResolvedStage, outcome: BackendOutcome, record: AttemptRecord): Promise<StageResult> {
  const { workspace, log } = setup;
  const attempt = setup.info.attempt;
  failIfEmptyIsFinal(stage, outcome, record);
  const reading = stage.contract === 'none' ? readFreeAnswer(outcome.text) : readAgentOutput(outcome.text);
  const fullAnswer = withoutReportBlock(outcome.text).trimEnd();
  const answer = capProse('text', fullAnswer, record.warnings, OUTPUT_CAPS.answerBytes);
  // A cut answer is kept whole in the workers' store: `final-answer` and `RunHandle.finalAnswer` read it there.
  // The agent's heartbeats have stopped: the attempt sends its own while the store takes it (or waits for the store).
  const keep = () => keepFinalAnswer(fullAnswer, answerPlace(setup));
  const answerRef = Buffer.byteLength(fullAnswer) > OUTPUT_CAPS.answerBytes ? { answerRef: await keepHeartbeating(() => latestHeartbeat(setup), keep) } : {};
  if (reading.kind === 'needs_input') {
    const question = capProse('question', reading.question, record.warnings);
    return { ...record, status: 'needs_input', summary: question, outputs: {}, question, answer, ...answerRef, ...(reading.blocked ? { blocked: true } : {}) };
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
    ...answerRef,
    ...(extra ? { report: extra } : {}),
    warnings: [...record.warnings, ...checked.warnings],
  };
}

/** Where this attempt keeps a cut answer whole: the workers' store, else (activities built without one) its bookkeeping. */
function answerPlace(setup: AttemptSetup): FinalAnswerPlace {
  const { deps, input, log, info } = setup;
  return { runId: input.runId, namespace: info.workflowNamespace, store: deps.store, transcriptPath: log.transcriptPath(info.attempt), workspacesRoot: deps.workspacesRoot };
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
      hint: FINAL_EMPTY_ANSWER_HINT,
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
