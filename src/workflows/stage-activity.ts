import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  isCancellation,
  proxyActivities,
  TimeoutFailure,
} from '@temporalio/workflow';
import type { PipelineActivities } from '../contracts/activities.js';
import type { StageAttemptInput } from '../contracts/stage-attempt.js';
import type { RunOwnerClaim } from '../contracts/run-owner.js';
import { formatDuration } from '../pipeline/duration.js';
import { temporalRetryPolicy } from '../pipeline/retry-policy.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { StageResult, TokenUsage } from '../pipeline/stage-result.js';
import { onOwner } from './run-owner.js';


/**
 * Runs one stage attempt (with Temporal's retries) as an activity with the stage's options. `retryFromFile`: the
 * stage's `retry:` shapes Temporal's retry policy; false for runs recorded before it could (fixed 1 s ×2 up to 1 m).
 * `owner`: the worker that holds the run, whose queue the activity goes to; the attempts an execution made on an
 * earlier owner (`input.execution.attemptsBefore`) count against the stage's `retries`.
 */
export function runStageActivity(input: StageAttemptInput, retryFromFile = false, owner?: RunOwnerClaim): Promise<StageResult> {
  const { stage, round, continuation } = input;
  const summary = [`stage ${stage.id}`, stage.backend, stage.model, round > 1 ? `round ${round}` : '', continuation?.kind ?? '', owner ? `on ${owner.identity}` : '']
    .filter(Boolean)
    .join(' · ');
  // A fallback always gets one attempt: it is only scheduled when the earlier owner had retries left.
  const retries = Math.max(0, stage.retries - (input.execution?.attemptsBefore ?? 0));
  const options = {
    summary,
    startToCloseTimeout: stage.timeoutMs,
    // Heartbeats are how a dead worker is noticed: without them a crashed stage would wait out the whole timeout.
    heartbeatTimeout: stage.heartbeatTimeoutMs,
    // Wait for the agent process to be really stopped before the run reports cancelled.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: retryFromFile
      ? temporalRetryPolicy(retries, stage.retry)
      : {
          maximumAttempts: retries + 1,
          initialInterval: '1s',
          backoffCoefficient: 2,
          maximumInterval: '1m',
        },
  };
  return proxyActivities<PipelineActivities>(owner ? onOwner(owner, options) : options).runStage(input);
}

/** A stage's activity call that failed for good, as the workflow can see it. */
export interface StageFailure {
  type: string;
  message: string;
  cancelled: boolean;
  /** From the failure details, or the last heartbeat of a timed-out attempt; either counts every attempt of the execution. @unit US dollars */
  costUsd?: number;
  usage?: TokenUsage;
  sessionId?: string;
  /** The run's workspace, when the attempt got as far as opening it. */
  workspace?: string;
  /** Attempts the activity made, as far as the workflow can tell. */
  attempts: number;
}

/** Reads an activity failure: the innermost message a person should read, and any cost or session it reported. */
export function readStageFailure(err: unknown, stage: Pick<ResolvedStage, 'id' | 'retries'> & Partial<Pick<ResolvedStage, 'timeoutMs' | 'heartbeatTimeoutMs'>>): StageFailure {
  let current: unknown = err;
  while (current instanceof Error && current.cause instanceof Error && !(current instanceof ApplicationFailure) && !(current instanceof TimeoutFailure)) {
    current = current.cause;
  }
  const facts = readFacts(current);
  const attempts =
    typeof facts.attempt === 'number'
      ? facts.attempt
      : err instanceof ActivityFailure && err.retryState === 'MAXIMUM_ATTEMPTS_REACHED'
        ? stage.retries + 1
        : 1;
  const base = {
    cancelled: isCancellation(err),
    costUsd: typeof facts.costUsd === 'number' ? facts.costUsd : undefined,
    usage: readUsage(facts.usage),
    sessionId: typeof facts.sessionId === 'string' ? facts.sessionId : undefined,
    workspace: typeof facts.workspace === 'string' ? facts.workspace : undefined,
    attempts,
  };
  if (current instanceof ApplicationFailure) return { ...base, type: current.type ?? 'ApplicationFailure', message: current.message };
  if (current instanceof TimeoutFailure) {
    return { ...base, type: `ACTIVITY_${current.timeoutType ?? 'TIMEOUT'}`, message: timeoutMessage(stage, current) };
  }
  if (current instanceof Error) return { ...base, type: current.name, message: current.message };
  return { ...base, type: 'Error', message: String(current) };
}

/** Which of the stage's time limits ran out, with its length and the field that sets it. */
function timeoutMessage(stage: Parameters<typeof readStageFailure>[1], failure: TimeoutFailure): string {
  const type = failure.timeoutType;
  if (type === 'START_TO_CLOSE' && stage.timeoutMs !== undefined) {
    return `stage ${stage.id} timed out: an attempt ran longer than its \`timeout\` of ${formatDuration(stage.timeoutMs)} and was stopped; raise the stage's \`timeout\` if it needs longer`;
  }
  if (type === 'HEARTBEAT' && stage.heartbeatTimeoutMs !== undefined) {
    return (
      `stage ${stage.id} timed out: its attempt sent no heartbeat for its \`heartbeatTimeout\` of ${formatDuration(stage.heartbeatTimeoutMs)} ` +
      '(its worker stopped or was cut off); it is retried while the stage has `retries` left'
    );
  }
  return `stage ${stage.id} timed out (${type}): ${failure.message}`;
}

function readFacts(failure: unknown): Record<string, unknown> {
  const details = failure instanceof ApplicationFailure ? failure.details?.[0] : failure instanceof TimeoutFailure ? failure.lastHeartbeatDetails : undefined;
  return details !== null && typeof details === 'object' ? (details as Record<string, unknown>) : {};
}

export function readUsage(value: unknown): TokenUsage | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens } = value as Record<string, unknown>;
  if (typeof inputTokens !== 'number' || typeof outputTokens !== 'number') return undefined;
  return {
    inputTokens,
    outputTokens,
    cacheReadTokens: typeof cacheReadTokens === 'number' ? cacheReadTokens : 0,
    cacheWriteTokens: typeof cacheWriteTokens === 'number' ? cacheWriteTokens : 0,
  };
}
