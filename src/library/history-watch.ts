import type { Client } from '@temporalio/client';
import { GRPC_STATUS, grpcErrorOf } from '../grpc-errors.js';
import { pageSizeFor } from './history-pages.js';

/*
 * Waits for a run's state to change without polling it: Temporal's history long-poll (`GetWorkflowExecutionHistory`
 * with `waitNewEvent`) answers as soon as an event is added to the execution's history, and every change of a run's
 * state adds one (a stage's activity scheduled or closed, a decision's update, a timer, the end). A quiet run, one
 * waiting days for a person, costs one request per long-poll period (the server answers empty after about 20 s)
 * instead of one per second. Heartbeats add no event: the caller bounds the wait while an agent works, to read its
 * progress from the pending activity.
 */

/** The longest one long-poll request is left open; the server answers sooner when nothing happens. @unit milliseconds */
const LONG_POLL_MS = 60_000;

/** The execution whose state was last read, as `readRun` saw it. */
export interface SeenExecution {
  runId: string;
  /** Events in its history when the state was read: an event after these is a change. */
  historyLength: number;
  /** The history's size then, to size the pages read. @unit bytes */
  historyBytes?: number;
}

/** Follows one run's history across calls, so the history is read once and each wait continues where the last ended. */
export class HistoryWatch {
  private runId: string | undefined;
  private pageToken: Uint8Array | undefined;
  private pageSize = pageSizeFor(0);

  constructor(
    private readonly client: Client,
    private readonly workflowId: string,
  ) {}

  /**
   * Resolves once the execution's history has grown past what `seen` saw, when it has closed, after `maxMs` (when
   * given), or when `signal` aborts. @throws what the service throws, but for the request's own deadline
   */
  async changeAfter(seen: SeenExecution, options: { maxMs?: number; signal?: AbortSignal } = {}): Promise<void> {
    if (seen.runId !== this.runId) {
      // A new execution (the run continued as new): its history is read from its start.
      this.runId = seen.runId;
      this.pageToken = undefined;
      // Pages stay far under gRPC's message limit (see history-pages.ts); the first ones catch up with the history.
      this.pageSize = pageSizeFor(seen.historyBytes && seen.historyLength ? seen.historyBytes / seen.historyLength : 0);
    }
    const until = options.maxMs === undefined ? undefined : Date.now() + options.maxMs;
    for (;;) {
      const left = until === undefined ? LONG_POLL_MS : Math.min(LONG_POLL_MS, until - Date.now());
      if (left <= 0 || options.signal?.aborted) return;
      const page = await this.nextPage(left, options.signal);
      if (!page) continue;
      if (page.lastEventId > seen.historyLength) return;
      // No page after this one: the execution has closed (or continued as new).
      if (!this.pageToken) return;
    }
  }

  /** The next page of events (waiting for one at the end of the history), or undefined when `ms` passed first. */
  private async nextPage(ms: number, signal: AbortSignal | undefined): Promise<{ lastEventId: number } | undefined> {
    const { client } = this;
    const request = (): ReturnType<Client['workflowService']['getWorkflowExecutionHistory']> =>
      client.workflowService.getWorkflowExecutionHistory({
        namespace: client.options.namespace,
        execution: { workflowId: this.workflowId, runId: this.runId },
        nextPageToken: this.pageToken,
        waitNewEvent: true,
        maximumPageSize: this.pageSize,
      });
    try {
      const response = await client.connection.withDeadline(Date.now() + ms, () => (signal ? client.connection.withAbortSignal(signal, request) : request()));
      this.pageToken = response.nextPageToken?.length ? response.nextPageToken : undefined;
      const last = response.history?.events?.at(-1)?.eventId;
      return { lastEventId: last ? Number(last.toString()) : 0 };
    } catch (err) {
      // RESOURCE_EXHAUSTED: a page over the message limit, asked for again at half the size; DEADLINE_EXCEEDED: our own
      // bound on the request passed.
      const code = grpcErrorOf(err)?.code;
      if (code === GRPC_STATUS.RESOURCE_EXHAUSTED && this.pageSize > 1) this.pageSize = Math.max(1, Math.floor(this.pageSize / 2));
      else if (!signal?.aborted && code !== GRPC_STATUS.DEADLINE_EXCEEDED) throw err;
      return undefined;
    }
  }
}

