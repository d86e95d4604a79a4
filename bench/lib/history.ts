import type { WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { tsToMs } from '@temporalio/common/lib/time.js';

/** One stage activity as the workflow history records it. All times are the server's. @unit milliseconds since the epoch */
export interface ActivityTimeline {
  stageId: string;
  /** ActivityTaskScheduled: the workflow asked for the stage. */
  scheduledAt: number;
  /** ActivityTaskStarted of the last attempt: a worker took the task. */
  startedAt?: number;
  /** ActivityTaskCompleted (or Failed/TimedOut/Canceled): the result reached the server. */
  closedAt?: number;
  attempt?: number;
  outcome?: 'completed' | 'failed' | 'timed-out' | 'cancelled';
}

/** A run's history reduced to what the latency figures need. */
export interface RunTimeline {
  /** WorkflowExecutionStarted. */
  startedAt: number;
  /** WorkflowExecutionCompleted/Failed, when the run has ended. */
  closedAt?: number;
  activities: ActivityTimeline[];
  /** Each WorkflowTaskStarted → WorkflowTaskCompleted span: the worker running workflow code. @unit milliseconds */
  workflowTaskMs: number[];
  /** Each WorkflowTaskScheduled → WorkflowTaskStarted span: a workflow task waiting for a worker. @unit milliseconds */
  workflowTaskQueueMs: number[];
  eventCount: number;
  /** Size of the history as the server reports it. @unit bytes */
  historyBytes: number;
}

/** The stage id from an activity's input (the first argument is the stage attempt input, `{ stage: { id } }`). */
function stageIdOf(input: { payloads?: Payload[] | null } | null | undefined): string {
  const first = input?.payloads?.[0];
  if (!first) return '?';
  const value = defaultPayloadConverter.fromPayload<{ stage?: { id?: string } }>(first);
  return value?.stage?.id ?? '?';
}

/** Reads a run's history and returns its timeline. */
export async function readTimeline(handle: WorkflowHandle): Promise<RunTimeline> {
  const history = await handle.fetchHistory();
  const events = history.events ?? [];
  const byScheduledId = new Map<string, ActivityTimeline>();
  const workflowTaskMs: number[] = [];
  const workflowTaskQueueMs: number[] = [];
  let startedAt = Number.NaN;
  let closedAt: number | undefined;
  let workflowTaskScheduled = 0;
  let workflowTaskStarted = 0;
  for (const event of events) {
    const at = tsToMs(event.eventTime);
    const id = String(event.eventId);
    if (event.workflowExecutionStartedEventAttributes) startedAt = at;
    if (event.workflowExecutionCompletedEventAttributes || event.workflowExecutionFailedEventAttributes) closedAt = at;
    if (event.workflowTaskScheduledEventAttributes) workflowTaskScheduled = at;
    if (event.workflowTaskStartedEventAttributes) {
      workflowTaskStarted = at;
      workflowTaskQueueMs.push(at - workflowTaskScheduled);
    }
    if (event.workflowTaskCompletedEventAttributes) workflowTaskMs.push(at - workflowTaskStarted);
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) byScheduledId.set(id, { stageId: stageIdOf(scheduled.input), scheduledAt: at });
    const started = event.activityTaskStartedEventAttributes;
    if (started) {
      const activity = byScheduledId.get(String(started.scheduledEventId));
      if (activity) Object.assign(activity, { startedAt: at, attempt: started.attempt ?? undefined });
    }
    const closings: [{ scheduledEventId?: unknown } | null | undefined, ActivityTimeline['outcome']][] = [
      [event.activityTaskCompletedEventAttributes, 'completed'],
      [event.activityTaskFailedEventAttributes, 'failed'],
      [event.activityTaskTimedOutEventAttributes, 'timed-out'],
      [event.activityTaskCanceledEventAttributes, 'cancelled'],
    ];
    for (const [attributes, outcome] of closings) {
      const activity = attributes ? byScheduledId.get(String(attributes.scheduledEventId)) : undefined;
      if (activity) Object.assign(activity, { closedAt: at, outcome });
    }
  }
  return {
    startedAt,
    closedAt,
    activities: [...byScheduledId.values()],
    workflowTaskMs,
    workflowTaskQueueMs,
    eventCount: events.length,
    historyBytes: (await handle.describe()).historySize ?? Number.NaN,
  };
}
