import { allHandlersFinished, ApplicationFailure, condition, continueAsNew, patched, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { PipelineActivities } from '../contracts/activities.js';
import { cameUnencrypted } from '../contracts/payload-origin.js';
import { findReplayProblem, MESSAGE_REPLAYED, sealTimeOf } from '../contracts/message-seal.js';
import { LeaseBook } from './lease-book.js';
import { requireKeyHolder } from './key-holders.js';
import {
  acquireLeaseUpdate,
  describeLeaseQuery,
  MAX_LEASE_TTL_MS,
  releaseLeaseSignal,
  releaseLeaseUpdate,
  renewLeaseUpdate,
  type AcquireLeaseInput,
  type LeaseWorkflowInput,
} from '../contracts/lease-messages.js';

/** A lease workflow hands its book to a fresh execution past this many events, keeping its history small. */
export const LEASE_HISTORY_EVENTS = 2_000;
/** An empty book closes its workflow after this long without a request; the next request starts a new one. @unit milliseconds */
export const LEASE_IDLE_MS = 10 * 60_000;
/** The longest an acquire update waits before it answers with the queue position. @unit milliseconds */
export const MAX_ACQUIRE_WAIT_MS = 60_000;

/** How often a key somebody waits for checks that the runs holding it for their life still run. @unit milliseconds */
export const RUN_CHECK_MS = 15_000;

/**
 * Patch (issue 33): a lease held without a time limit is granted only to a run that is running, and a book, a key
 * text or a hand-over point in a start input no key holder wrote is ignored. Decided once, at the execution's first
 * task: an execution recorded before it keeps the old behaviour to its end; its next execution takes the new one.
 */
export const LEASE_TRUST_PATCH = 'trust33-lease-live-runs';

/**
 * Patch: a sealed message sent no later than the newest the book took from its holder is a copy (read from history and
 * sent again) and is refused, or ignored as a signal; the book remembers the seals and stays open until the seals of
 * holders that left are forgotten. Decided once, at the execution's first task, like LEASE_TRUST_PATCH: an execution
 * recorded before takes every message as it did.
 */
export const LEASE_COPIES_PATCH = 'lease-copies-refused';

const { closedRuns } = proxyActivities<PipelineActivities>({ startToCloseTimeout: '1m', retry: { maximumAttempts: 3 } });

/**
 * One key's lock: the mutex pattern of Temporal's samples, with updates instead of signals so that every request
 * gets its answer (granted, or how many are ahead). The book lives in this workflow's memory and history, so it
 * survives worker and server restarts; holders that stop renewing expire on a durable timer.
 */
export async function leaseWorkflow(input: LeaseWorkflowInput): Promise<void> {
  const checksRuns = patched(LEASE_TRUST_PATCH);
  // A start no key holder wrote (a namespace client started the key's workflow first) hands over nothing.
  const given: Partial<LeaseWorkflowInput> = checksRuns && cameUnencrypted(input) ? {} : input;
  let key = given.key;
  const book = new LeaseBook(given.book);
  // The book to check messages against for copies: only under the patch, so earlier executions replay as recorded.
  const copies = patched(LEASE_COPIES_PATCH) ? book : undefined;
  const handOverAt = given.handOverAfterEvents ?? LEASE_HISTORY_EVENTS;
  let changed = false;
  // Set once the execution is about to hand over or close: waiting acquires answer at once and their callers ask again.
  let draining = false;
  setHandler(
    acquireLeaseUpdate,
    async (asked) => {
      takeSeal(copies, asked);
      // Only under the patch: an entry naming its run is checked by the reclaim, which an earlier execution never did.
      const req = checksRuns ? { ...asked, run: runOf(asked) } : asked;
      // The key's text, for `limits`, from the first request that brings it when the start did not.
      key ??= typeof req.key === 'string' ? req.key : undefined;
      if (checksRuns && req.ttlMs === undefined && !book.holds(req.holder) && !book.isWaiting(req.holder)) await requireLiveRun(req.run!);
      const first = book.request(req, Date.now(), req.waitMs);
      changed = true;
      if (first.granted || draining || !req.waitMs) return first;
      await condition(() => draining || !book.isWaiting(req.holder), req.waitMs);
      return book.answer(req.holder);
    },
    { validator: (req) => validateAcquire(req, copies) },
  );
  setHandler(
    renewLeaseUpdate,
    (req) => {
      takeSeal(copies, req);
      changed = true;
      return book.renew(req.holder, Date.now());
    },
    { validator: (req) => validateHolder(req, 'renewLease', renewLeaseUpdate.name, copies) },
  );
  setHandler(
    releaseLeaseUpdate,
    (req) => {
      takeSeal(copies, req);
      changed = true;
      return book.release(req.holder, Date.now());
    },
    { validator: (req) => validateHolder(req, 'releaseLease', releaseLeaseUpdate.name, copies) },
  );
  setHandler(releaseLeaseSignal, (req) => {
    // A signal has no validator: what the update's would refuse is ignored, leaving the book as it was.
    try {
      validateHolder(req, 'releaseLease', releaseLeaseSignal.name, copies, 'signal');
    } catch {
      return;
    }
    takeSeal(copies, req);
    changed = true;
    book.release(req.holder, Date.now());
  });
  setHandler(describeLeaseQuery, () => ({ key: key ?? '', ...book.view() }));
  let checkedAt = Date.now();
  for (;;) {
    book.expire(Date.now());
    // The idle book stays open until it forgets the last seal: a new execution would take that holder's copies.
    const sealsKeptUntil = copies?.forgetSeals(Date.now());
    checkedAt = await reclaimFromClosedRuns(book, checkedAt);
    const info = workflowInfo();
    if (info.continueAsNewSuggested || info.historyLength >= handOverAt) break;
    const deadline = book.runsToCheck().length > 0 ? Math.min(book.nextDeadline() ?? Infinity, checkedAt + RUN_CHECK_MS) : book.nextDeadline();
    const wait = deadline === undefined ? Math.max(LEASE_IDLE_MS, (sealsKeptUntil ?? 0) - Date.now()) : Math.max(1, deadline - Date.now());
    changed = false;
    const woken = await condition(() => changed, wait);
    if (!woken && deadline === undefined && book.isEmpty()) break;
  }
  draining = true;
  await condition(allHandlersFinished);
  // A request may have come in while the handlers finished: then the book is not empty (or has seals to keep) and goes on.
  if (book.isEmpty() && copies?.forgetSeals(Date.now()) === undefined && workflowInfo().historyLength < handOverAt) return;
  await continueAsNew<typeof leaseWorkflow>({ ...given, key: key ?? '', book: book.snapshot() });
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

/**
 * A lease without a time limit lives as long as its run: the run must be running now, or the key would be held by
 * nobody until somebody waits for it (and checks). Checked like the reclaim does, with the same activity.
 * @throws ApplicationFailure LEASE_REQUEST_INVALID naming the run; LEASE_RUN_UNCHECKED (the caller asks again) when no worker could tell
 */
async function requireLiveRun(run: string): Promise<void> {
  let closed: string[];
  try {
    closed = await closedRuns([run]);
  } catch {
    throw ApplicationFailure.create({ type: 'LEASE_RUN_UNCHECKED', message: `could not check that run ${run} is running; ask again` });
  }
  if (closed.length > 0) {
    throw ApplicationFailure.create({
      type: 'LEASE_REQUEST_INVALID',
      message: `a lease without ttlMs is held for a run's life, and run ${JSON.stringify(run)} is not a pipeline run that is running; give a ttlMs, or name the run's workflow id`,
      nonRetryable: true,
    });
  }
}

/**
 * The run a lease without ttl is held for. Workers of releases before issue 33 held a lent folder's lease under the
 * holder `run:<workflow id>` without naming the run: that holder names it, so their requests go on being granted
 * during a rolling deploy, and checked like the others.
 */
function runOf(req: AcquireLeaseInput): string | undefined {
  if (req.run !== undefined || typeof req.holder !== 'string' || !req.holder.startsWith('run:')) return req.run;
  return req.holder.slice('run:'.length);
}

const refuse = (message: string): never => {
  throw ApplicationFailure.create({ type: 'LEASE_REQUEST_INVALID', message, nonRetryable: true });
};

/**
 * Refuses a message no key holder wrote for this message and workflow, one without a holder, and (with `copies`, the
 * book under LEASE_COPIES_PATCH) a copy of a message the book already took from the holder.
 */
function validateHolder(req: { holder: string }, what: string, name: string, copies: LeaseBook | undefined, kind: 'update' | 'signal' = 'update'): void {
  requireKeyHolder(req, `the ${what} ${kind}`, name, kind);
  if (typeof req?.holder !== 'string' || req.holder.length === 0 || req.holder.length > 500) refuse('a lease request needs a `holder` id of 1 to 500 characters');
  const copied = copies && findReplayProblem(sealTimeOf(req), copies.lastSeal(req.holder));
  if (copied) throw ApplicationFailure.create({ type: MESSAGE_REPLAYED, message: `the ${what} ${kind} refused: ${copied}`, nonRetryable: true });
}

/** Remembers when the holder sealed a message the workflow takes (under the patch), so that its copies are refused. */
function takeSeal(copies: LeaseBook | undefined, req: { holder: string }): void {
  const sentAt = sealTimeOf(req);
  if (copies && sentAt !== undefined) copies.takeSeal(req.holder, sentAt);
}

function validateAcquire(req: AcquireLeaseInput, copies: LeaseBook | undefined): void {
  validateHolder(req, 'acquireLease', acquireLeaseUpdate.name, copies);
  if (!Number.isInteger(req.limit) || req.limit < 1) refuse(`a lease limit must be a whole number of at least 1, not ${String(req.limit)}`);
  if (req.ttlMs !== undefined && (!Number.isFinite(req.ttlMs) || req.ttlMs < 1_000 || req.ttlMs > MAX_LEASE_TTL_MS)) {
    refuse(`a lease ttlMs must be from 1000 to ${MAX_LEASE_TTL_MS}, not ${String(req.ttlMs)}`);
  }
  // Every lease ends: at its ttl unless renewed, or with the run it is held for.
  const run = runOf(req);
  if (req.ttlMs === undefined && (typeof run !== 'string' || run.length === 0 || run.length > 1_000)) {
    refuse('a lease without ttlMs must name the run it is held for (`run`: its workflow id); give a ttlMs, or the run');
  }
  if (req.waitMs !== undefined && (!Number.isFinite(req.waitMs) || req.waitMs < 0 || req.waitMs > MAX_ACQUIRE_WAIT_MS)) refuse(`a lease waitMs must be between 0 and ${MAX_ACQUIRE_WAIT_MS}`);
  if (req.key !== undefined && (typeof req.key !== 'string' || req.key.length > 1_000)) refuse('a lease request\'s `key` must be the key\'s text');
}
