import type { WorkflowExecutionDescription, WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import type { RunState, RunStatus, StageState } from '../pipeline/run-state.js';
import type { StageResult } from '../pipeline/stage-result.js';
import { resolveStage } from '../pipeline/stage-options.js';
import type { PipelineRunInput } from '../workflows/messages.js';

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;
type HistoryEvent = NonNullable<History['events']>[number];
type Failure = NonNullable<NonNullable<HistoryEvent['activityTaskFailedEventAttributes']>['failure']>;
type Timestamp = { seconds?: number | { toNumber(): number } | null; nanos?: number | null } | null | undefined;

/*
 * When no worker answers the status query (none is running, or the run is closed and nobody can replay it), the run
 * is rebuilt from its event history: the start input names the stages, and each stage attempt is an activity whose
 * input names its stage and whose result is the StageResult. Waits for a person are not in the history in a readable
 * form, so a rebuilt state never shows them; `status` says the state came from history.
 */

/** Decodes the first payload of a payload list, or undefined. */
export function decodeFirst<T>(payloads: { payloads?: Payload[] | null } | null | undefined): T | undefined {
  const first = payloads?.payloads?.[0];
  if (!first) return undefined;
  try {
    return defaultPayloadConverter.fromPayload<T>(first);
  } catch {
    return undefined;
  }
}

/** Converts a protobuf timestamp to milliseconds since the epoch. */
export function timestampMs(ts: Timestamp): number | undefined {
  if (!ts || ts.seconds == null) return undefined;
  const seconds = typeof ts.seconds === 'number' ? ts.seconds : ts.seconds.toNumber();
  return seconds * 1000 + Math.floor((ts.nanos ?? 0) / 1e6);
}

/** The stage (and review round) each activity of the run worked on, keyed by activity id. */
export function mapActivitiesToStages(events: readonly HistoryEvent[]): Map<string, { stageId: string; round?: number }> {
  const byActivity = new Map<string, { stageId: string; round?: number }>();
  for (const event of events) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (!scheduled?.activityId) continue;
    const input = decodeFirst<{ stage?: { id?: string }; round?: number }>(scheduled.input);
    if (input?.stage?.id) byActivity.set(scheduled.activityId, { stageId: input.stage.id, round: input.round });
  }
  return byActivity;
}

const CLOSED_STATUS: Record<string, RunStatus> = {
  COMPLETED: 'completed',
  FAILED: 'failed',
  TIMED_OUT: 'failed',
  TERMINATED: 'failed',
  CANCELLED: 'cancelled',
};

/** Rebuilds the run's state from its history and description. */
export function rebuildRunState(history: History, description: WorkflowExecutionDescription): RunState {
  const events = history.events ?? [];
  const input = decodeFirst<PipelineRunInput>(events[0]?.workflowExecutionStartedEventAttributes?.input);
  // A run that continued as new starts from the state its earlier executions handed over; this history adds the rest.
  const carried = input?.carryOver?.state;
  const stages: StageState[] = carried ? structuredClone(carried.stages) : [
    ...(input?.pipeline.stages ?? []).map((s) => resolveStage(input!.pipeline, s)),
    ...(input?.pipeline.finally ?? []).map((s) => resolveStage(input!.pipeline, s, true)),
  ].map((resolved) => ({ id: resolved.id, status: 'pending', backend: resolved.backend, model: resolved.model, ...(resolved.isFinally ? { finally: true } : {}) }));
  const stageById = (id: string): StageState | undefined => stages.find((s) => s.id === id);
  const scheduled = new Map<number, { stage: StageState; round?: number }>();
  let workspace: string | undefined = carried?.workspace;
  let costUsd = carried?.costUsd ?? 0;

  for (const event of events) {
    const at = timestampMs(event.eventTime);
    const eventId = Number(event.eventId);
    const s = event.activityTaskScheduledEventAttributes;
    if (s) {
      const attemptInput = decodeFirst<{ stage?: { id?: string }; round?: number }>(s.input);
      const stage = attemptInput?.stage?.id ? stageById(attemptInput.stage.id) : undefined;
      if (stage) {
        scheduled.set(eventId, { stage, round: attemptInput?.round });
        Object.assign(stage, { status: 'running', startedAt: at, finishedAt: undefined, round: attemptInput?.round });
      }
      continue;
    }
    const started = event.activityTaskStartedEventAttributes;
    if (started) {
      const entry = scheduled.get(Number(started.scheduledEventId));
      if (entry) entry.stage.attempt = started.attempt ?? undefined;
      continue;
    }
    const completed = event.activityTaskCompletedEventAttributes;
    const failed = event.activityTaskFailedEventAttributes ?? event.activityTaskTimedOutEventAttributes;
    const cancelled = event.activityTaskCanceledEventAttributes;
    const scheduledId = completed?.scheduledEventId ?? failed?.scheduledEventId ?? cancelled?.scheduledEventId;
    const entry = scheduledId == null ? undefined : scheduled.get(Number(scheduledId));
    if (!entry) continue;
    entry.stage.finishedAt = at;
    if (completed) {
      const result = decodeFirst<StageResult>(completed.result);
      entry.stage.result = result;
      entry.stage.status = result?.status === 'completed' || !result ? 'completed' : 'failed';
      if (result) {
        entry.stage.attempt = result.attempt;
        costUsd += result.costUsd ?? 0;
        workspace ??= result.workspace;
      }
    } else if (failed) {
      entry.stage.status = 'failed';
      entry.stage.error = describeFailure(failed.failure);
    } else {
      entry.stage.status = 'cancelled';
    }
  }

  const closed = CLOSED_STATUS[description.status.name];
  if (closed) for (const stage of stages) if (stage.status === 'pending') stage.status = 'skipped';
  return {
    runId: description.workflowId,
    pipeline: input?.pipeline.name ?? description.type,
    status: closed ?? 'running',
    inputs: input?.inputs ?? {},
    stages,
    costUsd,
    budgetUsd: carried ? carried.budgetUsd : input?.pipeline.budgetUsd,
    workspace,
    ...(carried?.warnings ? { warnings: carried.warnings } : {}),
    ...(carried?.reviews ? { reviews: carried.reviews } : {}),
    startedAt: carried?.startedAt ?? description.startTime.getTime(),
    finishedAt: description.closeTime?.getTime(),
  };
}

/** The innermost failure, which is the activity's own (`CLI_CRASHED: …`) rather than Temporal's wrapper. */
function describeFailure(failure: Failure | null | undefined): { type: string; message: string } {
  let current: Failure | null | undefined = failure;
  while (current?.cause) current = current.cause;
  return { type: current?.applicationFailureInfo?.type || (current?.timeoutFailureInfo ? 'TIMEOUT' : 'ActivityFailure'), message: current?.message ?? 'the stage failed' };
}
