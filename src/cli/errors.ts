import { CommanderError } from 'commander';
import { PipelineValidationError } from '../pipeline/errors.js';
import { DevServerError } from '../dev/dev-server-error.js';
// The leaf module of the error classes, not library/errors.ts: that one loads the Temporal client, and every command
// (`--help`, `validate`) loads this module.
import { AgentPipelineError, InvalidRequestError, TemporalUnavailableError, type InvalidRequestCode } from '../errors.js';

/** Exit codes of the `agent-pipeline` command (DESIGN.md; docs/cli.md). */
export const EXIT = {
  OK: 0,
  /** The run failed or was cancelled, or something unexpected went wrong. */
  PIPELINE_FAILED: 1,
  /** Bad usage, an invalid pipeline file, or a run/schedule/stage that does not exist or cannot take the action. */
  USAGE: 2,
  TEMPORAL_UNREACHABLE: 3,
  /** Ctrl-C while watching: the run goes on. */
  INTERRUPTED: 130,
} as const;

/** The code a usage message starts with (`[DEPLOYMENT_NOT_FOUND] …`), when it is one of the library's. */
function usageCode(message: string): InvalidRequestCode {
  const code = /^\[([A-Z_]+)\]/.exec(message)?.[1];
  return code === 'BUILD_NOT_FOUND' || code === 'DEPLOYMENT_NOT_FOUND' || code === 'TRANSCRIPT_NOT_FOUND' ? code : 'INVALID_REQUEST';
}

/** A mistake in how the command was called (its arguments and options): exit 2, no stack trace. The library's own errors exit 2 as well. */
export class UsageError extends InvalidRequestError {
  override readonly name = 'UsageError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(usageCode(message), message, options);
  }
}

/**
 * The exit code for an error that ended a command: the library's errors (and the dev server's and the parser's) say
 * what went wrong, the command line decides how it exits.
 */
export function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
  if (err instanceof TemporalUnavailableError) return EXIT.TEMPORAL_UNREACHABLE;
  // RunFailedError (library/errors.ts), by its code for the same reason.
  if (err instanceof AgentPipelineError && err.code === 'RUN_FAILED') return EXIT.PIPELINE_FAILED;
  if (err instanceof AgentPipelineError || err instanceof PipelineValidationError || err instanceof DevServerError) return EXIT.USAGE;
  // A Temporal CLI that cannot be found or run is the machine's setup (TEMPORAL_CLI, PATH), not a run that failed. By
  // name: importing dev/temporal-cli.ts would load its dependencies at every command's start.
  if (err instanceof Error && err.name === 'TemporalCliNotFoundError') return EXIT.USAGE;
  // A scenario file (`dev --scenario`) that is missing or wrong is an invalid file, as a pipeline file is.
  if (err instanceof Error && err.name === 'ScenarioValidationError') return EXIT.USAGE;
  return EXIT.PIPELINE_FAILED;
}
