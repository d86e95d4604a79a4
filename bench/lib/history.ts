import type { Client, WorkflowHandle } from '@temporalio/client';
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

/** The activity type of a stage attempt. */
const STAGE_ACTIVITY = 'runStage';

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
  try {
    const value = defaultPayloadConverter.fromPayload<{ stage?: { id?: string } }>(first);
    return value?.stage?.id ?? '?';
  } catch {
    return '?'; // an encrypted payload (the encryption benchmark's runs): the timeline's order still says which stage
  }
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
    // Stage attempts only: a run also calls a few activities of its own (its input and trust checks, its owner's claim).
    if (scheduled && scheduled.activityType?.name === STAGE_ACTIVITY) byScheduledId.set(id, { stageId: stageIdOf(scheduled.input), scheduledAt: at });
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

/** The size of a workflow's history over every execution of its id (a run that continued as new has several). */
export interface WorkflowHistorySize {
  /** @unit bytes */
  bytes: number;
  events: number;
  executions: number;
}

/**
 * Sums `historySizeBytes` and the event counts of every execution of `workflowId`, read from visibility once the chain
 * has ended (one execution not continued as new, all closed). Visibility lags the close by a moment, so it polls.
 * @throws Error when the executions do not settle within `timeoutMs`
 */
export async function readWorkflowHistorySize(client: Client, workflowId: string, timeoutMs = 30_000): Promise<WorkflowHistorySize> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const executions = [];
    for await (const execution of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) executions.push(execution);
    const open = executions.filter((e) => e.status.name === 'RUNNING');
    const ended = executions.filter((e) => e.status.name !== 'RUNNING' && e.status.name !== 'CONTINUED_AS_NEW');
    const sized = executions.every((e) => e.historySize !== undefined);
    if (executions.length > 0 && open.length === 0 && ended.length === 1 && sized) {
      return {
        bytes: executions.reduce((sum, e) => sum + (e.historySize ?? 0), 0),
        events: executions.reduce((sum, e) => sum + e.historyLength, 0),
        executions: executions.length,
      };
    }
    if (Date.now() > deadline) throw new Error(`the executions of ${workflowId} did not settle in visibility: ${executions.map((e) => `${e.runId} ${e.status.name}`).join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
