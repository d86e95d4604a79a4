import type { RunState } from '../pipeline/run-state.js';
import type { PipelineProblem, PipelineValidationError } from '../pipeline/errors.js';
import { AgentPipelineError, InvalidRequestError, TemporalUnavailableError, withCliMessage, type AgentPipelineErrorCode, type InvalidRequestCode } from '../errors.js';

// The library's errors: the base classes every layer below the CLI throws, and those only a client meets. What turns
// the Temporal client's errors into them is temporal-errors.ts: these load without the client (`validate`).
export { AgentPipelineError, InvalidRequestError, TemporalUnavailableError, type AgentPipelineErrorCode, type InvalidRequestCode };

/** One problem in a pipeline definition, as `agent-pipeline validate` and `validatePipeline` list it: which file, where in it, and what is wrong. */
export interface PipelineProblemReport {
  /**
   * The file the problem is in: the pipeline file (`<definition NAME>` for an in-memory definition), or a prompt or
   * system prompt file it names.
   */
  file: string;
  /** Line in that file, when known (never for an in-memory definition). @unit 1-based line */
  line?: number;
  /**
   * Where on that line the field (or its nearest parent the file has) or the template variable is, when known.
   * `validate` lists problems by file, then line, then column. @unit 1-based column
   */
  column?: number;
  /**
   * YAML path such as `stages[2].needs[0]` (empty for the whole document), followed by the template variable for an
   * unknown one (`stages[1].prompt {{inputs.x}}`).
   */
  field: string;
  message: string;
}

/** Thrown when a pipeline file or definition is invalid; `problems` lists every problem found. Code `PIPELINE_INVALID`. */
export class PipelineInvalidError extends AgentPipelineError {
  override readonly name = 'PipelineInvalidError';
  constructor(
    readonly file: string,
    readonly problems: PipelineProblemReport[],
    message: string,
    options?: { cause?: unknown },
  ) {
    super('PIPELINE_INVALID', message, options);
  }

  /** The same problems as the parser's error, with its message. */
  static from(err: PipelineValidationError, withLines = true): PipelineInvalidError {
    const problems = err.problems.map((p) => toProblemReport(err.file, p, withLines));
    const message = withLines
      ? err.message
      : `[PIPELINE_INVALID] ${err.file} is not a valid pipeline:\n${problems.map((p) => `  ${p.field || '(document)'}: ${p.message}`).join('\n')}`;
    return new PipelineInvalidError(err.file, problems, message, { cause: err });
  }
}

/** A parser's problem as the library reports it, in `file`; with `withPlace` false, without its line and column. */
export function toProblemReport(file: string, problem: PipelineProblem, withPlace = true): PipelineProblemReport {
  const place = withPlace && problem.line ? { line: problem.line, ...(problem.column ? { column: problem.column } : {}) } : {};
  return { file, ...place, field: problem.path, message: problem.message };
}

/** Thrown when no worker polls the run's task queue, so a decision cannot be taken. Code `NO_WORKER`. */
export class NoWorkerError extends TemporalUnavailableError {
  override readonly name = 'NoWorkerError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options, 'NO_WORKER');
  }
}

/** How a run that did not complete ended. */
export type RunFailureKind = 'failed' | 'cancelled' | 'terminated' | 'timed_out';

/** Thrown by `run.result()` when the run ended other than completed; `state` is its final state. Code `RUN_FAILED`. */
export class RunFailedError extends AgentPipelineError {
  override readonly name = 'RunFailedError';
  constructor(
    /** How the run ended. */
    readonly type: RunFailureKind,
    /** The run's final state: stages, their errors, cost. */
    readonly state: RunState,
    options?: { cause?: unknown },
  ) {
    super('RUN_FAILED', `[RUN_FAILED] run ${state.runId} ${type.replace('_', ' ')}${state.error ? `: ${state.error.message}` : ''}`, options);
  }
}

/** Thrown when no run has the given id. Code `RUN_NOT_FOUND`. */
export class RunNotFoundError extends AgentPipelineError {
  override readonly name = 'RunNotFoundError';
  constructor(
    readonly runId: string,
    options?: { cause?: unknown },
  ) {
    super('RUN_NOT_FOUND', `[RUN_NOT_FOUND] no run "${runId}"; \`client.list()\` (\`agent-pipeline list\`) shows the runs`, options);
    withCliMessage(this, `[RUN_NOT_FOUND] no run "${runId}"; \`agent-pipeline list\` shows the runs`);
  }
}