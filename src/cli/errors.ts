import { CommanderError } from 'commander';
import { PipelineValidationError } from '../pipeline/errors.js';
import { DevServerError } from '../dev/dev-server.js';
import { ConfigError } from '../config.js';
import { AgentPipelineError, InvalidRequestError, RunFailedError, TemporalUnavailableError, toLibraryError } from '../library/errors.js';

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

/** A mistake in how the command was called or in the files it was given: exit 2, no stack trace. */
export class UsageError extends InvalidRequestError {
  override readonly name = 'UsageError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(/^\[([A-Z_]+)\]/.exec(message)?.[1] ?? 'INVALID_REQUEST', message, options);
  }
}

/** Temporal could not be reached at the configured address: exit 3, with how to configure it (the library's error). */
export { TemporalUnavailableError as TemporalUnreachableError };

/**
 * Turns what the Temporal client throws into an error a person can act on, keeping the original as `cause`: the
 * library's typed errors (one mapping for the library and the commands). Errors we do not recognise pass through (exit 1).
 */
export function toUserError(err: unknown, address?: string): unknown {
  return toLibraryError(err, address);
}

/** The exit code for an error that ended a command. */
export function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
  if (err instanceof TemporalUnavailableError) return EXIT.TEMPORAL_UNREACHABLE;
  if (err instanceof RunFailedError) return EXIT.PIPELINE_FAILED;
  if (err instanceof AgentPipelineError || err instanceof PipelineValidationError || err instanceof DevServerError || err instanceof ConfigError) return EXIT.USAGE;
  return EXIT.PIPELINE_FAILED;
}
