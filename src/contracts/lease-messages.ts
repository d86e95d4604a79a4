import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';

/** The workflow type of the one long-lived workflow per key that keeps its book (see lease-workflow.ts). */
export const LEASE_WORKFLOW_TYPE = 'leaseWorkflow';

/**
 * Lease workflows' ids start with this without encryption; the rest is the key, so the id names the key in the Web
 * UI. With encryption the id is a keyed hash of the key instead, which names no input value (activities/leases/lease-ids.ts).
 */
export const LEASE_WORKFLOW_ID_PREFIX = 'agent-pipeline-lease:';

/** The longest time limit of a lease: every lease ends, at its ttl unless renewed, or with its run. @unit milliseconds */
export const MAX_LEASE_TTL_MS = 24 * 60 * 60_000;

/** The longest key: a workflow id is at most 1,000 bytes, and a key is shown in lists (the pipeline's `limits` rule). */
export { MAX_LIMIT_KEY_LENGTH as MAX_LEASE_KEY_LENGTH } from '../pipeline/limits.js';

/** The id of the lease workflow that keeps `key`'s book, in the plain form (the key in the id). */
export function leaseWorkflowId(key: string): string {
  return `${LEASE_WORKFLOW_ID_PREFIX}${key}`;
}

/** What starts (or continues) a lease workflow: its key, and the book an earlier execution handed over. */
export interface LeaseWorkflowInput {
  key: string;
  book?: LeaseBookState;
  /** Hand the book to a fresh execution past this many history events (tests set it low). @default 2000 */
  handOverAfterEvents?: number;
}

export interface AcquireLeaseInput extends LeaseRequest {
  /** How long the update may wait for the grant before it answers with the queue position. @unit milliseconds @default 0 */
  waitMs?: number;
  /** The key's text, which `limits` shows: a workflow whose id is a hash learns it here if its start did not carry it. */
  key?: string;
}

/** Takes the key or joins its queue; answers at once when granted, else after at most `waitMs` with the position. */
export const acquireLeaseUpdate = defineUpdate<LeaseAnswer, [AcquireLeaseInput]>('acquireLease');
/** Moves a holder's deadline on; `held: false` when its lease expired or was released. */
export const renewLeaseUpdate = defineUpdate<{ held: boolean; expiresAt?: number }, [{ holder: string }]>('renewLease');
/** Gives the key back or leaves its queue; true when the holder was in the book. */
export const releaseLeaseUpdate = defineUpdate<boolean, [{ holder: string }]>('releaseLease');
/**
 * The same as a signal, for when the key's workflow refuses updates: Temporal admits ten in flight, and the waiters'
 * requests (each waits up to its poll) can fill them. A release must not wait for them, or they wait for its ttl.
 */
export const releaseLeaseSignal = defineSignal<[{ holder: string }]>('releaseLeaseSignal');
/** The key's book: holders and waiters in order, and its limit. Costs no history. */
export const describeLeaseQuery = defineQuery<Omit<LeaseBookState, 'seals'> & { key: string }>('describeLease');

/** One holder or waiter of a key. */
export interface LeaseEntry {
  /** Unique id of whoever holds or waits (a stage attempt, a run); the same id asking again is the same entry. */
  holder: string;
  /** How many holders the key may have at once, as this holder asked (the head waiter's limit decides its grant). */
  limit: number;
  /** How long the lease lives without a renewal (1000 to MAX_LEASE_TTL_MS); absent: held until released (a run's life). @unit milliseconds */
  ttlMs?: number;
  /** What `limits` and `status` show for it, e.g. `run fix-12 stage build attempt 2`. */
  label?: string;
  /**
   * Required for a lease without `ttlMs`: the workflow id of the run it is held for, which must be running when it
   * asks; a run that closed without giving it back (terminated) loses it.
   */
  run?: string;
  /** When it first asked. @unit milliseconds since the epoch */
  since: number;
  /** When a holder was granted the key. @unit milliseconds since the epoch */
  grantedAt?: number;
  /** When it expires unless renewed (holders) or asked again (waiters). @unit milliseconds since the epoch */
  expiresAt?: number;
}

/** The whole book, as carried across continue-as-new and shown by the describe query. */
export interface LeaseBookState {
  holders: LeaseEntry[];
  waiters: LeaseEntry[];
  /** The limit the latest request named: what `limits` shows as the key's limit. */
  limit: number;
  /**
   * When the newest sealed message the book took from each holder was sent, for holders in the book and for those
   * that left it less than the seal's age ago: a message sealed no later is a copy and refused. Carried across
   * continue-as-new; not shown by `describeLease`. @unit milliseconds since the epoch
   */
  seals?: { holder: string; sealedAt: number }[];
}

/** What one request to take the key answers. */
export type LeaseAnswer =
  | { granted: true; expiresAt?: number }
  | { granted: false; /** Waiters before this one. */ ahead: number; holders: number; limit: number };

/** A request to take a key. */
export interface LeaseRequest {
  holder: string;
  limit: number;
  ttlMs?: number;
  label?: string;
  run?: string;
}
