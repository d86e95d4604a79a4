import { isGrpcDeadlineError, type Client } from '@temporalio/client';
import { decryptionProblem } from '../../codec/data-converter.js';
import { describeLeaseQuery, LEASE_WORKFLOW_TYPE, type LeaseEntry } from '../../contracts/lease-messages.js';
import { isIdOf, type LeaseIds } from './lease-ids.js';
import { closedOrMissing, type LeaseKeyState } from './lease-request.js';

/*
 * Reading the books of keys for `limits` and `status`: by the workflows' answers, never by their ids, which are hashes
 * with encryption on. A key may have two books during a rolling deploy (its id and an earlier one): they are shown as
 * one, each holder and waiter once.
 */

/** How long `limits` waits for each key's workflow to answer. @unit milliseconds */
const DESCRIBE_DEADLINE_MS = 5_000;

/** A key's workflow that did not answer in time (no worker takes its tasks). */
export class LeaseQueryTimeoutError extends Error {
  override readonly name = 'LeaseQueryTimeoutError';
}

/**
 * One book as its workflow answers, or undefined when it has no open workflow.
 * @param deadlineMs how long the workflow may take to answer @unit milliseconds @default as long as Temporal waits
 * @throws LeaseQueryTimeoutError when the workflow did not answer within `deadlineMs`
 */
async function readBook(client: Client, workflowId: string, deadlineMs?: number): Promise<LeaseKeyState | undefined> {
  const query = (): Promise<LeaseKeyState> => client.workflow.getHandle(workflowId).query(describeLeaseQuery);
  try {
    return deadlineMs === undefined ? await query() : await client.connection.withDeadline(Date.now() + deadlineMs, query);
  } catch (err) {
    if (closedOrMissing(err)) return undefined;
    if (deadlineMs !== undefined && isGrpcDeadlineError(err)) {
      throw new LeaseQueryTimeoutError(`the lease workflow ${workflowId} did not answer within ${deadlineMs / 1000}s: is a worker running on its task queue?`, { cause: err });
    }
    throw err;
  }
}

/**
 * The books of one key as one: holders and waiters in order, each once; the key's own book's limit. Whoever still
 * waits in one of the books (it holds the key's own book and waits for an earlier worker's) waits for the key.
 */
function mergeBooks(key: string, books: readonly LeaseKeyState[]): LeaseKeyState | undefined {
  const once = (entries: LeaseEntry[]): LeaseEntry[] => entries.filter((e, i) => entries.findIndex((o) => o.holder === e.holder) === i);
  const waiters = once(books.flatMap((b) => b.waiters));
  const waiting = new Set(waiters.map((w) => w.holder));
  const holders = once(books.flatMap((b) => b.holders)).filter((h) => !waiting.has(h.holder));
  if (holders.length + waiters.length === 0) return undefined;
  return { key, holders, waiters, limit: books[0]?.limit ?? 1 };
}

/** One key's holders and waiters (in order), or undefined when nobody holds or waits for it. */
export async function describeBooks(client: Client, ids: LeaseIds, key: string): Promise<LeaseKeyState | undefined> {
  const books = await Promise.all([ids.current(key), ...ids.earlier(key)].map((id) => readBook(client, id)));
  return mergeBooks(key, books.filter((b): b is LeaseKeyState => b !== undefined));
}

/**
 * Every key somebody holds or waits for (at most `limit`), by key. A book whose key text does not name its id (a
 * workflow a namespace client started under that id) is left out: its text cannot be trusted.
 */
export async function listBooks(client: Client, ids: LeaseIds, limit: number): Promise<LeaseKeyState[]> {
  const workflowIds: string[] = [];
  const query = `WorkflowType = '${LEASE_WORKFLOW_TYPE}' AND ExecutionStatus = 'Running'`;
  for await (const info of client.workflow.list({ query, pageSize: Math.min(limit, 100) })) {
    workflowIds.push(info.workflowId);
    if (workflowIds.length >= limit * 2) break;
  }
  const byKey = new Map<string, LeaseKeyState[]>();
  // Every query settles before this returns, failed or not: the caller closes its connection next, and a query still in
  // flight then is retried by the client on a closed channel, which throws outside any promise and ends the process.
  const queried = [...new Set(workflowIds)];
  // The deadline keeps a key whose workflow never answers (its worker gone mid-task) to seconds.
  const settled = await Promise.allSettled(queried.map((id) => readBook(client, id, DESCRIBE_DEADLINE_MS)));
  // What this client must fix first: it cannot decrypt the answers (every key fails alike).
  const undecryptable = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected' && decryptionProblem(s.reason) !== undefined);
  if (undecryptable) throw undecryptable.reason;
  const books = settled.map((s, i) => ({ id: queried[i], book: s.status === 'fulfilled' ? s.value : undefined }));
  for (const { id, book } of books) {
    if (!book || !isIdOf(ids, book.key, id)) continue;
    byKey.set(book.key, [...(byKey.get(book.key) ?? []), book]);
  }
  const merged = [...byKey.entries()].map(([key, list]) => mergeBooks(key, list));
  return merged.filter((s): s is LeaseKeyState => s !== undefined).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)).slice(0, limit);
}
