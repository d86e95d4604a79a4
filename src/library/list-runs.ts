import { FORKED_FROM_MEMO_KEY } from '../contracts/run-fork.js';
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { LEASE_WAITS_MEMO_KEY } from '../contracts/lease-wait.js';
import { PIPELINE_WORKFLOW_TYPE } from '../contracts/messages.js';
import { RUN_STARTED_AT_MEMO_KEY } from '../contracts/run-carry-over.js';
import { COST_USD_ATTRIBUTE, CURRENT_STAGES_ATTRIBUTE, PIPELINE_NAME_ATTRIBUTE, RUN_STATUS_ATTRIBUTE } from '../contracts/search-attributes.js';
import { InvalidRequestError } from './errors.js';
import { RUN_LIST_STATUSES, toRunListStatus, type RunListStatus } from './run-list-status.js';

export { RUN_LIST_STATUSES, toRunListStatus, type RunListStatus };

const TIMED_OUT = `(ExecutionStatus = 'TimedOut' OR (ExecutionStatus = 'Failed' AND ${RUN_STATUS_ATTRIBUTE.name} = 'timed_out'))`;

/** The status of one run in `client.list()`: a status to filter on, or a run that continued as a new one. */
export type RunListItemStatus = RunListStatus | 'continued_as_new';

/** The visibility clause each status stands for. */
const STATUS_CLAUSES: Record<RunListStatus, string> = {
  running: "ExecutionStatus = 'Running'",
  completed: "ExecutionStatus = 'Completed'",
  failed: "ExecutionStatus = 'Failed'",
  cancelled: "ExecutionStatus = 'Canceled'",
  terminated: "ExecutionStatus = 'Terminated'",
  // A run ended by the pipeline `timeout` or a stage's timeouts fails in Temporal's eyes; the workflow marks it timed_out.
  timed_out: TIMED_OUT,
  // Waiting for a person is our own state; the workflow keeps it in a search attribute. `blocked` (an agent's
  // question waits for an answer) is one kind of waiting.
  waiting: `ExecutionStatus = 'Running' AND ${RUN_STATUS_ATTRIBUTE.name} IN ('waiting', 'blocked')`,
  blocked: `ExecutionStatus = 'Running' AND ${RUN_STATUS_ATTRIBUTE.name} = 'blocked'`,
};

/** Which runs `client.list()` returns. */
export interface RunListFilter {
  /** Only runs of this pipeline (the `name` in its file). */
  pipeline?: string;
  /** Only runs in this state. */
  status?: RunListStatus;
  /** Only runs started within this long. @unit milliseconds */
  sinceMs?: number;
  /** At most this many runs, in Temporal's visibility order: running ones first, then the most recently ended. @default 20 */
  limit?: number;
}

/** Which runs `client.listAll()` yields, and how many it reads a request. */
export interface RunPagingFilter extends Omit<RunListFilter, 'limit'> {
  /** Runs read from Temporal a request. @default 100 */
  pageSize?: number;
}

/** One run as `client.list()` and `list --json` report it. */
export interface RunListItem {
  runId: string;
  pipeline: string | null;
  /** running, waiting (for a person), blocked (an agent's question waits for an answer), completed, failed, cancelled, terminated, timed_out or continued_as_new. */
  status: RunListItemStatus;
  /** @unit milliseconds since the epoch */
  startedAt: number;
  /** @unit milliseconds since the epoch */
  closedAt: number | null;
  /** @unit US dollars */
  costUsd: number | null;
  /** Stages running at the last update. */
  currentStages: string[];
  /** What the run (no `stage`) or its stages wait for among concurrency keys (`limits:`), and how many are ahead. */
  leaseWaits: { stage?: string; key: string; ahead: number }[];
  /** A fork's source run and the stage it forked from (`fork`, `rerun`), from the run's memo. */
  forkedFrom: { runId: string; stage: string } | null;
}

/** The visibility query for the filter, on our search attributes and Temporal's built-in ones. */
export function buildListQuery(filter: Omit<RunListFilter, 'limit'>, now = Date.now()): string {
  const quote = (value: string): string => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  // A run that continued as new leaves one closed execution per hand-over; only its latest execution is the run.
  const clauses = [`WorkflowType = ${quote(PIPELINE_WORKFLOW_TYPE)}`, "ExecutionStatus != 'ContinuedAsNew'"];
  if (filter.pipeline) clauses.push(`${PIPELINE_NAME_ATTRIBUTE.name} = ${quote(filter.pipeline)}`);
  if (filter.status) {
    const status = toRunListStatus(filter.status);
    if (!status) {
      throw new InvalidRequestError('INVALID_REQUEST', `[INVALID_REQUEST] unknown run status "${filter.status}"; expected one of ${RUN_LIST_STATUSES.join(', ')}`);
    }
    clauses.push(STATUS_CLAUSES[status]);
  }
  if (filter.sinceMs) clauses.push(`StartTime > ${quote(new Date(now - filter.sinceMs).toISOString())}`);
  return clauses.join(' AND ');
}

function toItem(info: WorkflowExecutionInfo): RunListItem {
  const execution = info.status.name.toLowerCase();
  const own = info.typedSearchAttributes.get(RUN_STATUS_ATTRIBUTE);
  const refined = (execution === 'running' && (own === 'waiting' || own === 'blocked')) || (execution === 'failed' && own === 'timed_out');
  return {
    runId: info.workflowId,
    pipeline: info.typedSearchAttributes.get(PIPELINE_NAME_ATTRIBUTE) ?? null,
    // Temporal's execution statuses, lower case, are the list's own (running … continued_as_new).
    status: (refined ? own! : execution) as RunListItemStatus,
    // A continued run's latest execution started at its last hand-over; the memo keeps when the run started.
    startedAt: readStartedAt(info.memo) ?? info.startTime.getTime(),
    closedAt: info.closeTime?.getTime() ?? null,
    costUsd: info.typedSearchAttributes.get(COST_USD_ATTRIBUTE) ?? null,
    currentStages: info.typedSearchAttributes.get(CURRENT_STAGES_ATTRIBUTE) ?? [],
    leaseWaits: execution === 'running' ? readLeaseWaits(info.memo) : [],
    forkedFrom: readForkedFrom(info.memo),
  };
}

function readForkedFrom(memo: Record<string, unknown> | undefined): RunListItem['forkedFrom'] {
  const value = memo?.[FORKED_FROM_MEMO_KEY] as { runId?: unknown; stage?: unknown } | undefined;
  return typeof value?.runId === 'string' && typeof value.stage === 'string' ? { runId: value.runId, stage: value.stage } : null;
}

function readLeaseWaits(memo: Record<string, unknown> | undefined): RunListItem['leaseWaits'] {
  const value = memo?.[LEASE_WAITS_MEMO_KEY];
  return Array.isArray(value) ? (value as RunListItem['leaseWaits']) : [];
}

function readStartedAt(memo: Record<string, unknown> | undefined): number | undefined {
  const value = memo?.[RUN_STARTED_AT_MEMO_KEY];
  return typeof value === 'number' ? value : undefined;
}

/** Lists runs from the visibility store, running ones first, then the most recently ended; a run shows up a moment after it starts. */
export async function listRuns(client: Client, filter: RunListFilter = {}): Promise<RunListItem[]> {
  const limit = filter.limit ?? 20;
  const runs: RunListItem[] = [];
  for await (const run of iterateRuns(client, { ...filter, pageSize: Math.min(limit, 100) })) {
    runs.push(run);
    if (runs.length >= limit) break;
  }
  return runs;
}

/** Every run the filter matches, in the order of `listRuns`, read a page at a time as the caller asks for more. */
export async function* iterateRuns(client: Client, filter: RunPagingFilter = {}): AsyncGenerator<RunListItem, void, undefined> {
  const pageSize = filter.pageSize ?? 100;
  if (!Number.isInteger(pageSize) || pageSize < 1) {
    throw new InvalidRequestError('INVALID_REQUEST', `[INVALID_REQUEST] pageSize must be a whole number of runs, at least 1; got ${String(filter.pageSize)}`);
  }
  for await (const info of client.workflow.list({ query: buildListQuery(filter), pageSize })) yield toItem(info);
}
