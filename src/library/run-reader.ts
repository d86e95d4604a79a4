import type { Client, WorkflowExecutionDescription, WorkflowHandle } from '@temporalio/client';
import { BUNDLE_MEMO_KEY, type RunBundleSummary } from '../pipeline/run-bundle.js';
import type { RunState } from '../pipeline/run-state.js';
import { getStatusQuery, PIPELINE_WORKFLOW_TYPE } from '../workflows/messages.js';
import { InvalidRequestError } from '../errors.js';
import { decodeFirst, mapActivitiesToStages, rebuildRunState, timestampMs } from './run-history.js';

/** Where a run's state came from: the workflow's status query, the final result, or the event history. */
export type RunStateSource = 'query' | 'result' | 'history';

/** What a running stage attempt reported in its last heartbeat (the activity's `AttemptProgress`). */
export interface LiveAttempt {
  attempt: number;
  /** Cost of the stage so far, earlier attempts included, from the last heartbeat. @unit US dollars */
  costUsd?: number;
  turns?: number;
  /** @unit milliseconds since the epoch */
  lastHeartbeatAt?: number;
  /** Why the previous attempt failed, while a retry is pending. */
  lastFailure?: string;
}

/** A run as `status` and `watch` show it. */
export interface RunSnapshot {
  state: RunState;
  source: RunStateSource;
  /** Temporal's own status of the execution: RUNNING, COMPLETED, FAILED, CANCELLED, TERMINATED, TIMED_OUT… */
  executionStatus: string;
  taskQueue: string;
  /** False when no worker polls the run's task queue: the run cannot move until one starts. */
  workerPolling: boolean;
  /** Running stage attempts by stage id, from the server's pending-activity records. */
  live: Map<string, LiveAttempt>;
  /** The files the run carries (from its memo); undefined when its workers read them from disk. */
  bundle?: RunBundleSummary;
}

/** How long the status query may take before the state is rebuilt from history instead. @unit milliseconds */
const QUERY_TIMEOUT_MS = 5_000;

/** Caches which stage each activity id belongs to, so following a run fetches the history only for new activities. */
export class ActivityStageCache {
  private readonly stages = new Map<string, { stageId: string }>();

  async lookup(handle: WorkflowHandle, activityIds: readonly string[]): Promise<Map<string, { stageId: string }>> {
    if (activityIds.some((id) => !this.stages.has(id))) {
      for (const [id, entry] of mapActivitiesToStages((await handle.fetchHistory()).events ?? [])) this.stages.set(id, entry);
    }
    return this.stages;
  }
}

/**
 * Reads a run's state. Asks the workflow (status query) when a worker polls its task queue; otherwise, or when the
 * query fails, uses the final result of a completed run or rebuilds the state from the event history, so `status`
 * works for finished runs and with no worker running.
 * @throws InvalidRequestError `NOT_A_PIPELINE_RUN` when the id names a workflow that is not a pipeline run (and
 *   Temporal's `WorkflowNotFoundError` when it names none).
 */
export async function readRun(client: Client, id: string, cache = new ActivityStageCache()): Promise<RunSnapshot> {
  const handle = client.workflow.getHandle(id);
  const description = await handle.describe();
  if (description.type !== PIPELINE_WORKFLOW_TYPE) {
    throw new InvalidRequestError('NOT_A_PIPELINE_RUN', `[NOT_A_PIPELINE_RUN] "${id}" is a ${description.type} workflow, not an agent-pipeline run`);
  }
  const workerPolling = await hasWorkflowPollers(client, description.taskQueue);
  let state: RunState | undefined;
  let source: RunStateSource = 'query';
  if (workerPolling) state = await queryWithDeadline(client, handle);
  if (!state && description.status.name === 'COMPLETED') {
    state = (await handle.result()) as RunState;
    source = 'result';
  }
  if (!state) {
    state = rebuildRunState(await handle.fetchHistory(), description);
    source = 'history';
  }
  const live = await readLiveAttempts(handle, description, cache);
  const bundle = description.memo?.[BUNDLE_MEMO_KEY] as RunBundleSummary | undefined;
  return { state, source, executionStatus: description.status.name, taskQueue: description.taskQueue, workerPolling, live, bundle };
}

async function queryWithDeadline(client: Client, handle: WorkflowHandle): Promise<RunState | undefined> {
  try {
    return await client.connection.withDeadline(Date.now() + QUERY_TIMEOUT_MS, () => handle.query(getStatusQuery));
  } catch {
    // A busy or stopping worker, a deadline, a worker with older workflow code: the result or the history still
    // tell the story, and describe() has already shown the run exists.
    return undefined;
  }
}

/** True when some worker polled the task queue for workflow tasks recently (the server keeps pollers for minutes). */
export async function hasWorkflowPollers(client: Client, taskQueue: string): Promise<boolean> {
  const response = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: 1, // TASK_QUEUE_TYPE_WORKFLOW
  });
  return (response.pollers ?? []).length > 0;
}

async function readLiveAttempts(
  handle: WorkflowHandle,
  description: WorkflowExecutionDescription,
  cache: ActivityStageCache,
): Promise<Map<string, LiveAttempt>> {
  const pending = description.raw.pendingActivities ?? [];
  const live = new Map<string, LiveAttempt>();
  if (pending.length === 0) return live;
  const stages = await cache.lookup(handle, pending.map((p) => p.activityId ?? ''));
  for (const activity of pending) {
    const stageId = stages.get(activity.activityId ?? '')?.stageId;
    if (!stageId) continue;
    const progress = decodeFirst<{ costUsd?: number; turns?: number }>(activity.heartbeatDetails);
    live.set(stageId, {
      attempt: activity.attempt ?? 1,
      costUsd: progress?.costUsd,
      turns: progress?.turns,
      lastHeartbeatAt: timestampMs(activity.lastHeartbeatTime),
      lastFailure: activity.lastFailure?.message ?? undefined,
    });
  }
  return live;
}
