import type { Client, WorkflowHandle } from '@temporalio/client';
import { GRPC_STATUS, grpcErrorOf } from '../grpc-errors.js';
import { clientCodecs, decodeHistoryEvent } from './history-codec.js';

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;
/** One event of a workflow's history, as the service returns it. */
export type HistoryEvent = NonNullable<History['events']>[number];
type HistoryResponse = Pick<Awaited<ReturnType<Client['workflowService']['getWorkflowExecutionHistory']>>, 'history' | 'nextPageToken'>;

/*
 * A client never reads a run's history in one message. gRPC clients refuse messages over 4 MB by default (and the
 * Temporal client's attempt to raise that limit uses a channel option grpc-js does not know), while a long run's
 * history reaches tens of MB: `fetchHistory()` asks for pages of the server's default size, which for a dev server
 * is the whole history. So history is read in pages of a set `maximumPageSize`, sized from the run's average event
 * size so each page stays near HISTORY_PAGE_TARGET_BYTES, and halved when a page is refused anyway.
 */

/** The size a page of history aims at: a quarter of gRPC's default message limit. @unit bytes */
export const HISTORY_PAGE_TARGET_BYTES = 1024 * 1024;
/** The most events asked for in one page, whatever their size. */
export const HISTORY_PAGE_MAX_EVENTS = 500;
/** Events in the first page when the history's size is not known: the pages after it are sized from it. */
const FIRST_PAGE_EVENTS = 20;

/** Which history to read and how. */
export interface HistoryPagesOptions {
  workflowId: string;
  /** A run of the workflow; its latest run when left out. */
  runId?: string;
  /** Newest event first (for "which stage is this pending activity"), rather than oldest first. @default false */
  reverse?: boolean;
  /** The history's size as `describe()` reports it, to size the first page. */
  sizeHint?: { events: number; bytes?: number };
  /** Aim for pages about this big. @unit bytes @default HISTORY_PAGE_TARGET_BYTES */
  targetPageBytes?: number;
  /** Called with each page's event count and encoded size (tests and benchmarks). */
  onPage?(page: { events: number; bytes: number; pageSize: number }): void;
}

/** Events to ask for so that a page of events of `averageBytes` each stays near `targetBytes`. */
export function pageSizeFor(averageBytes: number, targetBytes = HISTORY_PAGE_TARGET_BYTES): number {
  if (!(averageBytes > 0)) return FIRST_PAGE_EVENTS;
  return Math.max(1, Math.min(HISTORY_PAGE_MAX_EVENTS, Math.floor(targetBytes / averageBytes)));
}

/** True when the request failed because the answer was over the receive limit (or the server's own limits). */
function isTooLarge(err: unknown): boolean {
  return grpcErrorOf(err)?.code === GRPC_STATUS.RESOURCE_EXHAUSTED;
}

/**
 * The events of a workflow's history, read in pages with a set `maximumPageSize` so no answer nears the gRPC
 * message limit: the first page is sized from `sizeHint`, each next one from the largest average event size seen so
 * far, and a page refused as too large is asked for again at half the size (down to one event, which a payload limit
 * of 2 MB keeps under 4 MB). Memory use is one page, whatever the length of the history. Events come with the payloads
 * the readers use decoded by the client's codecs (see `decodeHistoryEvent`).
 */
export async function* readHistoryEvents(client: Client, options: HistoryPagesOptions): AsyncGenerator<HistoryEvent, void, undefined> {
  const target = options.targetPageBytes ?? HISTORY_PAGE_TARGET_BYTES;
  const hint = options.sizeHint;
  let averageBytes = hint?.bytes && hint.events > 0 ? hint.bytes / hint.events : 0;
  let pageSize = pageSizeFor(averageBytes, target);
  let nextPageToken: Uint8Array | undefined;
  for (;;) {
    let response: HistoryResponse;
    try {
      response = await readPage(client, options, pageSize, nextPageToken);
    } catch (err) {
      if (!isTooLarge(err) || pageSize === 1) throw err;
      pageSize = Math.max(1, Math.floor(pageSize / 2));
      continue;
    }
    const events = response.history?.events ?? [];
    if (events.length > 0) {
      const bytes = approximateBytes(events);
      options.onPage?.({ events: events.length, bytes, pageSize });
      averageBytes = Math.max(averageBytes, bytes / events.length);
      pageSize = pageSizeFor(averageBytes, target);
    }
    const codecs = clientCodecs(client);
    for (const event of events) yield await decodeHistoryEvent(codecs, event);
    if (!response.nextPageToken?.length) return;
    nextPageToken = response.nextPageToken;
  }
}

function readPage(
  client: Client,
  options: HistoryPagesOptions,
  maximumPageSize: number,
  nextPageToken: Uint8Array | undefined,
): Promise<HistoryResponse> {
  const request = {
    namespace: client.options.namespace,
    execution: { workflowId: options.workflowId, runId: options.runId },
    maximumPageSize,
    nextPageToken,
  };
  return options.reverse
    ? client.workflowService.getWorkflowExecutionHistoryReverse(request)
    : client.workflowService.getWorkflowExecutionHistory(request);
}

/**
 * About the encoded size of `value`: its bytes and strings, plus a little per field. Payloads make up nearly all of a
 * history's bytes, so this tracks the size on the wire closely enough to size pages.
 * @unit bytes
 */
export function approximateBytes(value: unknown): number {
  if (value == null) return 0;
  if (value instanceof Uint8Array) return value.byteLength + 2;
  if (typeof value === 'string') return value.length + 2;
  if (typeof value !== 'object') return 4;
  let sum = 2;
  for (const item of Array.isArray(value) ? value : Object.values(value)) sum += approximateBytes(item);
  return sum;
}
