import {
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
} from '@temporalio/client';
import { NamespaceNotFoundError, WorkflowNotFoundError } from '@temporalio/common';
import { DECISION_NOT_TRUSTED } from '../contracts/trust-types.js';
import { PipelineValidationError } from '../pipeline/errors.js';
import { AgentPipelineError, InvalidRequestError, TemporalUnavailableError, withCliMessage } from '../errors.js';
import { GRPC_STATUS, grpcErrorOf } from '../grpc-errors.js';
import { ConfigError } from '../config.js';
import { decryptionProblem } from '../codec/data-converter.js';
import { NoWorkerError, PipelineInvalidError, RunNotFoundError } from './errors.js';
import { temporalRefused } from './temporal-refused.js';

/**
 * Turns what the Temporal client (or the parser) throws into the library's typed errors, keeping the original as
 * `cause`. Errors already typed, and errors not recognised, pass through unchanged.
 */
export function toLibraryError(err: unknown, address?: string): unknown {
  if (err instanceof AgentPipelineError) return err;
  if (err instanceof PipelineValidationError) return PipelineInvalidError.from(err);
  if (err instanceof WorkflowNotFoundError) return new RunNotFoundError(err.workflowId, { cause: err });
  if (err instanceof ScheduleNotFoundError) {
    return withCliMessage(
      new InvalidRequestError('SCHEDULE_NOT_FOUND', `[SCHEDULE_NOT_FOUND] no schedule "${err.scheduleId}"; \`client.schedules.list()\` (\`agent-pipeline schedule list\`) shows the schedules`, { cause: err }),
      `[SCHEDULE_NOT_FOUND] no schedule "${err.scheduleId}"; \`agent-pipeline schedule list\` shows the schedules`,
    );
  }
  if (err instanceof ScheduleAlreadyRunning) {
    return new InvalidRequestError('SCHEDULE_EXISTS', `[SCHEDULE_EXISTS] a schedule "${err.scheduleId}" exists already; pick another id or delete it first`, { cause: err });
  }
  if (err instanceof NamespaceNotFoundError) {
    return new InvalidRequestError('NAMESPACE_NOT_FOUND', `[NAMESPACE_NOT_FOUND] ${err.message}; set TEMPORAL_NAMESPACE to an existing namespace`, { cause: err });
  }
  if (err instanceof WorkflowUpdateFailedError && (err.cause as { type?: string } | undefined)?.type === DECISION_NOT_TRUSTED) {
    // The run accepts only decisions signed by a decision key: say so under its own code.
    return new InvalidRequestError(DECISION_NOT_TRUSTED, `[${DECISION_NOT_TRUSTED}] ${err.cause?.message ?? err.message}`, { cause: err });
  }
  if (err instanceof WorkflowUpdateFailedError) {
    // The workflow's validator said no ("stage review is not waiting for an answer"): the caller asked for the wrong thing.
    return new InvalidRequestError('REQUEST_REJECTED', `[REQUEST_REJECTED] ${err.cause?.message ?? err.message}`, { cause: err });
  }
  if (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError) {
    const question = '[NO_WORKER] the run did not take the request in time: is a worker running on its task queue?';
    return withCliMessage(new NoWorkerError(`${question} (createPipelineWorker, or \`agent-pipeline worker\`)`, { cause: err }), `${question} (\`agent-pipeline worker\`)`);
  }
  const undecryptable = decryptionProblem(err);
  if (undecryptable) return new ConfigError(`[CONFIG_INVALID] ${undecryptable}`, { cause: err });
  const grpc = grpcErrorOf(err);
  if (grpc?.code === GRPC_STATUS.UNAVAILABLE) {
    return new TemporalUnavailableError(`[TEMPORAL_UNREACHABLE] lost the connection to Temporal${address ? ` at ${address}` : ''}: ${grpc.details}`, { cause: err });
  }
  if (grpc && [GRPC_STATUS.INVALID_ARGUMENT, GRPC_STATUS.NOT_FOUND, GRPC_STATUS.ALREADY_EXISTS, GRPC_STATUS.FAILED_PRECONDITION].includes(grpc.code as 3)) {
    return temporalRefused(grpc.details, err);
  }
  return err;
}

/** Runs `fn`, rethrowing what it throws as a library error. */
export async function typedErrors<T>(fn: () => Promise<T>, address?: string): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toLibraryError(err, address);
  }
}
