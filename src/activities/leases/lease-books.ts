import type { Client } from '@temporalio/client';
import { describeLeaseQuery, LEASE_WORKFLOW_TYPE, type LeaseEntry } from '../../contracts/lease-messages.js';
import { isIdOf, type LeaseIds } from './lease-ids.js';
import { closedOrMissing, type LeaseKeyState } from './lease-request.js';

/*
 * Reading the books of keys for `limits` and `status`: by the workflows' answers, never by their ids, which are hashes
 * with encryption on. A key may have two books during a rolling deploy (its id and an earlier one): they are shown as
 * one, each holder and waiter once.
 */

/** One book as its workflow answers, or undefined when it has no open workflow. */
async function readBook(client: Client, workflowId: string): Promise<LeaseKeyState | undefined> {
  try {
    return await client.workflow.getHandle(workflowId).query(describeLeaseQuery);
  } catch (err) {
    if (closedOrMissing(err)) return undefined;
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
  const books = await Promise.all([...new Set(workflowIds)].map(async (id) => ({ id, book: await readBook(client, id).catch(() => undefined) })));
  for (const { id, book } of books) {
    if (!book || !isIdOf(ids, book.key, id)) continue;
    byKey.set(book.key, [...(byKey.get(book.key) ?? []), book]);
  }
  const merged = [...byKey.entries()].map(([key, list]) => mergeBooks(key, list));
  return merged.filter((s): s is LeaseKeyState => s !== undefined).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)).slice(0, limit);
}
