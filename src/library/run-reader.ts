import type { Client, WorkflowExecutionDescription, WorkflowHandle } from '@temporalio/client';
import { readWorkerPresence } from './worker-presence.js';
import { BUNDLE_MEMO_KEY, type RunBundleSummary } from '../pipeline/run-bundle.js';
import type { RunState } from '../pipeline/run-state.js';
import type { TokenUsage } from '../pipeline/stage-result.js';
import type { AgentActivity } from '../activities/backends/agent-activity.js';
import type { AttemptProgress } from '../activities/backends/stage-backend.js';
import { getStatusQuery, PIPELINE_WORKFLOW_TYPE } from '../contracts/messages.js';
import { InvalidRequestError } from '../errors.js';
import { clientCodecs, decodeFailure } from './history-codec.js';
import { readHistoryEvents } from './history-pages.js';
import { decodePayloadList } from '../codec/data-converter.js';
import { decodeFirst, lacksFirstStart, RunStateBuilder, timestampMs, withFirstStarts } from './run-history.js';
import { reconcileClosedRun } from './run-end.js';

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
  /** Tokens of the stage so far (earlier attempts included), from the last heartbeat. */
  usage?: TokenUsage;
  /** When the agent last produced output. @unit milliseconds since the epoch */
  lastEventAt?: number;
  /** What the agent is doing: its latest text and tool call (input summarised), from the last heartbeat. */
  agent?: AgentActivity;
  /**
   * What the attempt waits for before its next model call, a wait that costs nothing: its API key (named by a hash)
   * paused after a 429/529, or the worker's `requestsPerMinute` / `concurrentRequests` on it.
   */
  throttled?: { apiKey: string; reason: 'paused' | 'requestsPerMinute' | 'concurrentRequests'; until?: number; ahead?: number };
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
  /**
   * True when the run's history holds a cancellation it has not acted on yet: sent while no worker ran it, so the
   * run still runs until a worker starts. Read only when the state comes from the history (`source: 'history'`).
   */
  cancelRequested?: boolean;
  /** Running stage attempts by stage id, from the server's pending-activity records. */
  live: Map<string, LiveAttempt>;
  /** The files the run carries (from its memo); undefined when its workers read them from disk. */
  bundle?: RunBundleSummary;
  /** The execution read (a run that continued as new has several), and the length of its history then. */
  execution?: { runId: string; historyLength: number; historyBytes?: number };
}

/** How long the status query may take before the state is rebuilt from history instead. @unit milliseconds */
const QUERY_TIMEOUT_MS = 5_000;

/**
 * Caches which stage each activity id belongs to, so following a run reads history only for new activities, and then
 * only its newest pages: the history is read newest first, in pages, until every activity asked about is found.
 */
export class ActivityStageCache {
  private readonly stages = new Map<string, { stageId: string }>();
  /** First starts of reworked stages read from an execution's history (see `fillFirstStarts`), by execution. */
  firstStarts?: { runId: string; historyLength: number; byStage: Map<string, number> };

  async lookup(client: Client, description: WorkflowExecutionDescription, activityIds: readonly string[]): Promise<Map<string, { stageId: string }>> {
    const missing = new Set(activityIds.filter((id) => !this.stages.has(id)));
    if (missing.size === 0) return this.stages;
    const events = readHistoryEvents(client, { workflowId: description.workflowId, runId: description.runId, reverse: true, sizeHint: sizeHint(description) });
    for await (const event of events) {
      const scheduled = event.activityTaskScheduledEventAttributes;
      if (!scheduled?.activityId) continue;
      const stageId = decodeFirst<{ stage?: { id?: string } }>(scheduled.input)?.stage?.id;
      if (stageId && !this.stages.has(scheduled.activityId)) this.stages.set(scheduled.activityId, { stageId });
      missing.delete(scheduled.activityId);
      if (missing.size === 0) break;
    }
    return this.stages;
  }
}

/** The history's size from `describe()`, which sizes the first page read. */
function sizeHint(description: WorkflowExecutionDescription): { events: number; bytes?: number } {
  return { events: description.historyLength, bytes: description.historySize };
}

/**
 * The run's state rebuilt from its history, read oldest first in pages (see `readHistoryEvents`), and whether the
 * history holds a cancellation request (with no worker, nothing has acted on it yet).
 */
async function rebuildFromHistory(client: Client, description: WorkflowExecutionDescription): Promise<{ state: RunState; cancelRequested: boolean }> {
  const builder = new RunStateBuilder();
  let cancelRequested = false;
  for await (const event of readHistoryEvents(client, { workflowId: description.workflowId, runId: description.runId, sizeHint: sizeHint(description) })) {
    builder.add(event);
    if (event.workflowExecutionCancelRequestedEventAttributes) cancelRequested = true;
  }
  return { state: builder.build(description), cancelRequested };
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
  let cancelRequested: boolean | undefined;
  if (!state) {
    ({ state, cancelRequested } = await rebuildFromHistory(client, description));
    source = 'history';
  }
  // A closed run's query replays a workflow that may never have tracked its end (terminated, refused at its input
  // check): Temporal's word on the execution decides, so every reader says what `list` says.
  state = await reconcileClosedRun(handle, state, { status: description.status.name, closeTime: description.closeTime?.getTime() });
  if (source !== 'history') state = await fillFirstStarts(client, description, state, cache);
  const live = await readLiveAttempts(client, description, cache);
  const bundle = description.memo?.[BUNDLE_MEMO_KEY] as RunBundleSummary | undefined;
  const execution = { runId: description.runId, historyLength: description.historyLength, historyBytes: description.historySize };
  return { state, source, executionStatus: description.status.name, taskQueue: description.taskQueue, workerPolling, ...(cancelRequested ? { cancelRequested } : {}), live, bundle, execution };
}

/**
 * The state with the first start of each reworked stage where the workflow that answered did not keep it
 * (`lacksFirstStart`: a fork's preview then took the rework for the workspace to fork from). Read from the history,
 * where the stage's first attempt was scheduled, once a follow; left out when the history does not hold it (an
 * earlier execution of a run that continued as new).
 */
async function fillFirstStarts(client: Client, description: WorkflowExecutionDescription, state: RunState, cache: ActivityStageCache): Promise<RunState> {
  if (!state.stages.some(lacksFirstStart)) return state;
  const cached = cache.firstStarts;
  const stale = !cached || cached.runId !== description.runId || (cached.historyLength !== description.historyLength && state.stages.some((s) => lacksFirstStart(s) && !cached.byStage.has(s.id)));
  if (stale) {
    const { state: rebuilt } = await rebuildFromHistory(client, description);
    const byStage = new Map(rebuilt.stages.flatMap((s): [string, number][] => (s.firstStartedAt === undefined ? [] : [[s.id, s.firstStartedAt]])));
    cache.firstStarts = { runId: description.runId, historyLength: description.historyLength, byStage };
  }
  return withFirstStarts(state, cache.firstStarts!.byStage);
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

/**
 * True when a worker polls the task queue for workflow tasks: one polled within the last minute (a live worker's
 * long poll may wait that long), not merely one the server still lists (it keeps pollers for five minutes).
 */
export async function hasWorkflowPollers(client: Client, taskQueue: string): Promise<boolean> {
  return (await readWorkerPresence(client, taskQueue)).kind !== 'none';
}

async function readLiveAttempts(
  client: Client,
  description: WorkflowExecutionDescription,
  cache: ActivityStageCache,
): Promise<Map<string, LiveAttempt>> {
  const pending = description.raw.pendingActivities ?? [];
  const live = new Map<string, LiveAttempt>();
  if (pending.length === 0) return live;
  const stages = await cache.lookup(client, description, pending.map((p) => p.activityId ?? ''));
  const codecs = clientCodecs(client);
  for (const activity of pending) {
    const stageId = stages.get(activity.activityId ?? '')?.stageId;
    if (!stageId) continue;
    const progress = decodeFirst<Partial<AttemptProgress> & { throttled?: LiveAttempt['throttled'] }>(await decodePayloadList(codecs, activity.heartbeatDetails));
    const lastFailure = await decodeFailure(codecs, activity.lastFailure);
    live.set(stageId, {
      attempt: activity.attempt ?? 1,
      costUsd: progress?.costUsd,
      turns: progress?.turns,
      usage: progress?.usage,
      lastEventAt: progress?.lastEventAt,
      agent: progress?.agent,
      lastHeartbeatAt: timestampMs(activity.lastHeartbeatTime),
      lastFailure: lastFailure?.message ?? undefined,
      throttled: progress?.throttled,
    });
  }
  return live;
}
