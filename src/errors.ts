/*
 * The base error classes every layer below the command line throws (pipeline loading, bundling, configuration, the
 * library). A leaf: it imports nothing, so any module may use it without pulling in another layer. The library's
 * public errors (`library/errors.ts`) build on these; the CLI maps them to exit codes.
 */

/** The codes of the requests the library refuses ({@link InvalidRequestError}). */
export type InvalidRequestCode =
  | 'REQUEST_REJECTED'
  | 'FORK_REFUSED'
  | 'DECISION_NOT_TRUSTED'
  | 'RUN_CLOSED'
  | 'INPUT_INVALID'
  | 'INPUT_TOO_LARGE'
  | 'FILE_UNREADABLE'
  | 'FILE_NOT_FOUND'
  | 'PATH_ABSOLUTE'
  | 'PATH_OUTSIDE'
  | 'BUNDLE_TOO_LARGE'
  | 'NOT_A_PIPELINE_RUN'
  | 'SCHEDULE_NOT_FOUND'
  | 'SCHEDULE_EXISTS'
  | 'RUN_EXISTS'
  | 'NAMESPACE_NOT_FOUND'
  | 'TEMPORAL_REFUSED'
  | 'BUILD_NOT_FOUND'
  | 'DEPLOYMENT_NOT_FOUND'
  | 'TRANSCRIPT_NOT_FOUND'
  | 'FINAL_ANSWER_NOT_FOUND'
  | 'INVALID_REQUEST';

/** Every `code` a library error has, so a script can switch on it and the compiler checks the cases. */
export type AgentPipelineErrorCode =
  | InvalidRequestCode
  | 'PIPELINE_INVALID'
  | 'CONFIG_INVALID'
  | 'TEMPORAL_UNREACHABLE'
  | 'NO_WORKER'
  | 'RUN_FAILED'
  | 'RUN_NOT_FOUND';

/**
 * The errors the library throws. Each has a stable `code` (also the `[CODE]` that starts its message), so a
 * script can branch on `err.code` without parsing text; compare codes rather than `instanceof` when errors may
 * cross package copies.
 */
export class AgentPipelineError extends Error {
  override readonly name: string = 'AgentPipelineError';
  constructor(
    /** Stable identifier of what went wrong, e.g. `RUN_NOT_FOUND`. */
    readonly code: AgentPipelineErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * Thrown when a request cannot be done as asked. Codes: `REQUEST_REJECTED` (the run does not wait for this),
 * `DECISION_NOT_TRUSTED` (the run
 * accepts only decisions signed by a decision key), `RUN_CLOSED` (the run has ended), `INPUT_INVALID` (missing or unknown pipeline inputs), `INPUT_TOO_LARGE`,
 * `FILE_UNREADABLE`, `FILE_NOT_FOUND`, `PATH_ABSOLUTE` and `PATH_OUTSIDE` (a file the run would carry), `BUNDLE_TOO_LARGE`,
 * `FORK_REFUSED` (a fork its source run does not allow, see docs/forking.md), `NOT_A_PIPELINE_RUN`, `SCHEDULE_NOT_FOUND`, `SCHEDULE_EXISTS`, `NAMESPACE_NOT_FOUND`, `TEMPORAL_REFUSED`,
 * `INVALID_REQUEST` (anything else).
 */
export class InvalidRequestError extends AgentPipelineError {
  override readonly name: string = 'InvalidRequestError';
  declare readonly code: InvalidRequestCode;
  constructor(code: InvalidRequestCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** A setting in the environment has a value we cannot use: the message names the variable, its value and the fix. Code `CONFIG_INVALID`. */
export class ConfigError extends AgentPipelineError {
  override readonly name = 'ConfigError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('CONFIG_INVALID', message, options);
  }
}

/** Thrown when Temporal cannot be reached (refused, timed out, connection lost). Code `TEMPORAL_UNREACHABLE`. */
export class TemporalUnavailableError extends AgentPipelineError {
  override readonly name: string = 'TemporalUnavailableError';
  constructor(message: string, options?: { cause?: unknown }, code: 'TEMPORAL_UNREACHABLE' | 'NO_WORKER' = 'TEMPORAL_UNREACHABLE') {
    super(code, message, options);
  }
}

/*
 * Some errors are said differently at the command line. Where the library tells its caller of a call or an option
 * (`client.list()`, `{ stage }`), a person at a terminal, who never wrote either, is told of the command or flag
 * (`agent-pipeline list`, `--stage`). That wording rides on the error outside its public shape, so the library's
 * `message` stays the library's, and the command line prints it instead (cli/errors.ts).
 */
const CLI_MESSAGES = new WeakMap<Error, string>();

/** Gives `err` the message the command line shows instead of `err.message`. Returns `err`. */
export function withCliMessage<E extends Error>(err: E, cliMessage: string): E {
  CLI_MESSAGES.set(err, cliMessage);
  return err;
}

/** What the command line shows for `err`: the wording it was given for the command line, else its message. */
export function cliMessageOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  return CLI_MESSAGES.get(err) ?? err.message;
}
