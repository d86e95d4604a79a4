import { CommanderError } from 'commander';
import {
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  isGrpcServiceError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
} from '@temporalio/client';
import { NamespaceNotFoundError, WorkflowNotFoundError } from '@temporalio/common';
import { PipelineValidationError } from '../pipeline/errors.js';
import { DevServerError } from '../dev/dev-server.js';
import { ConfigError } from '../config.js';

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
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Temporal could not be reached at the configured address: exit 3, with how to configure it. */
export class TemporalUnreachableError extends Error {
  override readonly name = 'TemporalUnreachableError';
}

/** gRPC status codes we tell apart (https://grpc.github.io/grpc/core/md_doc_statuscodes.html). */
const GRPC = { INVALID_ARGUMENT: 3, DEADLINE_EXCEEDED: 4, NOT_FOUND: 5, ALREADY_EXISTS: 6, FAILED_PRECONDITION: 9, UNAVAILABLE: 14 } as const;

/**
 * Turns what the Temporal client throws into an error a person can act on, keeping the original as `cause`.
 * Errors we do not recognise pass through unchanged (exit 1).
 */
export function toUserError(err: unknown, address?: string): unknown {
  if (err instanceof UsageError || err instanceof TemporalUnreachableError || err instanceof PipelineValidationError || err instanceof ConfigError) return err;
  if (err instanceof WorkflowNotFoundError) {
    return new UsageError(`[RUN_NOT_FOUND] no run "${err.workflowId}"; \`agent-pipeline list\` shows the runs`, { cause: err });
  }
  if (err instanceof ScheduleNotFoundError) {
    return new UsageError(`[SCHEDULE_NOT_FOUND] no schedule "${err.scheduleId}"; \`agent-pipeline schedule list\` shows the schedules`, { cause: err });
  }
  if (err instanceof ScheduleAlreadyRunning) {
    return new UsageError(`[SCHEDULE_EXISTS] a schedule "${err.scheduleId}" exists already; pick another --id or delete it first`, { cause: err });
  }
  if (err instanceof NamespaceNotFoundError) {
    return new UsageError(`[NAMESPACE_NOT_FOUND] ${err.message}; set TEMPORAL_NAMESPACE to an existing namespace`, { cause: err });
  }
  if (err instanceof WorkflowUpdateFailedError) {
    // The workflow's validator said no ("stage review is not waiting for an answer"): the person asked for the wrong thing.
    return new UsageError(`[REQUEST_REJECTED] ${err.cause?.message ?? err.message}`, { cause: err });
  }
  if (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError) {
    return new TemporalUnreachableError(
      `[NO_WORKER] the run did not take the request in time: is a worker running on its task queue? (\`agent-pipeline worker\`)`,
      { cause: err },
    );
  }
  const grpc = findGrpcError(err);
  if (grpc) {
    if (grpc.code === GRPC.UNAVAILABLE) {
      return new TemporalUnreachableError(`[TEMPORAL_UNREACHABLE] lost the connection to Temporal${address ? ` at ${address}` : ''}: ${grpc.details}`, { cause: err });
    }
    if (grpc.code === GRPC.INVALID_ARGUMENT || grpc.code === GRPC.NOT_FOUND || grpc.code === GRPC.ALREADY_EXISTS || grpc.code === GRPC.FAILED_PRECONDITION) {
      return new UsageError(`Temporal refused the request: ${grpc.details}`, { cause: err });
    }
  }
  return err;
}

function findGrpcError(err: unknown): { code: number; details: string } | undefined {
  for (let current = err; current instanceof Error; current = current.cause) {
    if (isGrpcServiceError(current)) return { code: current.code, details: current.details };
  }
  return undefined;
}

/** The exit code for an error that ended a command. */
export function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
  if (err instanceof UsageError || err instanceof PipelineValidationError || err instanceof DevServerError || err instanceof ConfigError) return EXIT.USAGE;
  if (err instanceof TemporalUnreachableError) return EXIT.TEMPORAL_UNREACHABLE;
  return EXIT.PIPELINE_FAILED;
}
