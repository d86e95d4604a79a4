import { isGrpcServiceError } from '@temporalio/client';

/*
 * Temporal's client wraps the gRPC error of a refused or failed request (a ServiceError, a WorkflowUpdateFailedError,
 * ours around those): the status code that tells what happened is on an error somewhere down its `cause` chain.
 */

/** The gRPC status codes the project acts on (https://grpc.github.io/grpc/core/md_doc_statuscodes.html). */
export const GRPC_STATUS = {
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  /** A message over a receive limit, or a workflow with ten updates already in flight. */
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  UNAVAILABLE: 14,
} as const;

/** A gRPC error: its status code and the server's words. */
export type GrpcError = Error & { code: number; details: string };

/** The gRPC error `err` is, or was caused by; undefined when there is none. */
export function grpcErrorOf(err: unknown): GrpcError | undefined {
  for (let current = err; current instanceof Error; current = current.cause) {
    if (isGrpcServiceError(current)) return current;
  }
  return undefined;
}
