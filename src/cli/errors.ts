/** Exit codes of the `agent-pipeline` command (DESIGN.md). */
export const EXIT = {
  OK: 0,
  PIPELINE_FAILED: 1,
  USAGE: 2,
  TEMPORAL_UNREACHABLE: 3,
} as const;

/** A mistake in how the command was called or in the files it was given: exit 2, no stack trace. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Temporal could not be reached at the configured address: exit 3, with how to configure it. */
export class TemporalUnreachableError extends Error {
  override readonly name = 'TemporalUnreachableError';
}
