import { allHandlersFinished, ApplicationFailure, condition, continueAsNew, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { PipelineActivities } from '../contracts/activities.js';
import { LeaseBook } from './lease-book.js';
import { acquireLeaseUpdate, describeLeaseQuery, releaseLeaseUpdate, renewLeaseUpdate, type AcquireLeaseInput, type LeaseWorkflowInput } from '../contracts/lease-messages.js';

/** A lease workflow hands its book to a fresh execution past this many events, keeping its history small. */
export const LEASE_HISTORY_EVENTS = 2_000;
/** An empty book closes its workflow after this long without a request; the next request starts a new one. @unit milliseconds */
export const LEASE_IDLE_MS = 10 * 60_000;
/** The longest an acquire update waits before it answers with the queue position. @unit milliseconds */
export const MAX_ACQUIRE_WAIT_MS = 60_000;

/** How often a key somebody waits for checks that the runs holding it for their life still run. @unit milliseconds */
export const RUN_CHECK_MS = 15_000;

const { closedRuns } = proxyActivities<PipelineActivities>({ startToCloseTimeout: '1m', retry: { maximumAttempts: 3 } });

/**
 * One key's lock: the mutex pattern of Temporal's samples, with updates instead of signals so that every request
 * gets its answer (granted, or how many are ahead). The book lives in this workflow's memory and history, so it
 * survives worker and server restarts; holders that stop renewing expire on a durable timer.
 */
export async function leaseWorkflow(input: LeaseWorkflowInput): Promise<void> {
  const book = new LeaseBook(input.book);
  const handOverAt = input.handOverAfterEvents ?? LEASE_HISTORY_EVENTS;
  let changed = false;
  // Set once the execution is about to hand over or close: waiting acquires answer at once and their callers ask again.
  let draining = false;
  setHandler(
    acquireLeaseUpdate,
    async (req) => {
      const first = book.request(req, Date.now(), req.waitMs);
      changed = true;
      if (first.granted || draining || !req.waitMs) return first;
      await condition(() => draining || !book.isWaiting(req.holder), req.waitMs);
      return book.answer(req.holder);
    },
    { validator: validateAcquire },
  );
  setHandler(renewLeaseUpdate, ({ holder }) => {
    changed = true;
    return book.renew(holder, Date.now());
  });
  setHandler(releaseLeaseUpdate, ({ holder }) => {
    changed = true;
    return book.release(holder, Date.now());
  });
  setHandler(describeLeaseQuery, () => ({ key: input.key, ...book.snapshot() }));
  let checkedAt = Date.now();
  for (;;) {
    book.expire(Date.now());
    checkedAt = await reclaimFromClosedRuns(book, checkedAt);
    const info = workflowInfo();
    if (info.continueAsNewSuggested || info.historyLength >= handOverAt) break;
    const deadline = book.runsToCheck().length > 0 ? Math.min(book.nextDeadline() ?? Infinity, checkedAt + RUN_CHECK_MS) : book.nextDeadline();
    const wait = deadline === undefined ? LEASE_IDLE_MS : Math.max(1, deadline - Date.now());
    changed = false;
    const woken = await condition(() => changed, wait);
    if (!woken && deadline === undefined && book.isEmpty()) break;
  }
  draining = true;
  await condition(allHandlersFinished);
  // A request may have come in while the handlers finished: then the book is not empty and goes on.
  if (book.isEmpty() && workflowInfo().historyLength < handOverAt) return;
  await continueAsNew<typeof leaseWorkflow>({ ...input, book: book.snapshot() });
}

/**
 * A run holds its pipeline's keys for its life and gives them back when it ends; a run that was terminated cannot.
 * While somebody waits, the runs holding the key are checked every RUN_CHECK_MS, and the closed ones lose it.
 */
async function reclaimFromClosedRuns(book: LeaseBook, checkedAt: number): Promise<number> {
  const runs = book.runsToCheck();
  if (runs.length === 0 || Date.now() < checkedAt + RUN_CHECK_MS) return runs.length === 0 ? Date.now() : checkedAt;
  try {
    book.dropRuns(await closedRuns(runs.slice(0, 50)), Date.now());
  } catch {
    // No worker could tell: check again at the next interval.
  }
  return Date.now();
}

function validateAcquire(req: AcquireLeaseInput): void {
  const bad = (message: string): never => {
    throw ApplicationFailure.create({ type: 'LEASE_REQUEST_INVALID', message, nonRetryable: true });
  };
  if (typeof req.holder !== 'string' || req.holder.length === 0 || req.holder.length > 500) bad('a lease request needs a `holder` id of 1 to 500 characters');
  if (!Number.isInteger(req.limit) || req.limit < 1) bad(`a lease limit must be a whole number of at least 1, not ${String(req.limit)}`);
  if (req.ttlMs !== undefined && (!Number.isFinite(req.ttlMs) || req.ttlMs < 1_000)) bad(`a lease ttlMs must be at least 1000, not ${String(req.ttlMs)}`);
  if (req.waitMs !== undefined && (!Number.isFinite(req.waitMs) || req.waitMs < 0 || req.waitMs > MAX_ACQUIRE_WAIT_MS)) bad(`a lease waitMs must be between 0 and ${MAX_ACQUIRE_WAIT_MS}`);
}

