import { WorkflowNotFoundError } from '@temporalio/common';
import { MAX_LEASE_KEY_LENGTH, type LeaseBookState } from '../../contracts/lease-messages.js';

/** One lease to take: which key, how many may hold it at once, who asks, and how long it lives without a renewal. */
export interface LeaseRequest {
  /** The key, e.g. `repo:acme/web` (1 to 200 characters, no control characters). Never a secret: keys are listed. */
  key: string;
  /** How many holders the key may have at once (whole number ≥ 1). */
  limit: number;
  /** Unique id of this holder (e.g. `RUN/STAGE/WORKFLOW-RUN/ACTIVITY/ATTEMPT`); asking again with it is idempotent. */
  holder: string;
  /**
   * How long the lease lives without a renewal; a holder that dies is replaced within it. Absent: held until
   * released (a run's life), and then `run` is required. 1000 to 24 hours. @unit milliseconds
   */
  ttlMs?: number;
  /** What `agent-pipeline limits` shows for this holder. */
  label?: string;
  /**
   * Required for a lease without `ttlMs`: the workflow id of the run it is held for, which must be running; if that
   * run closes without releasing it (terminated), the key's workflow takes it back while somebody waits.
   */
  run?: string;
}

/** Where a waiting request stands, after each answer of the key's workflow. */
export interface LeaseWait {
  key: string;
  /** Waiters before this one. */
  ahead: number;
  holders: number;
  limit: number;
}

/** A key's book as `limits` lists it. */
export interface LeaseKeyState extends Omit<LeaseBookState, 'seals'> {
  key: string;
}

/** A request the key's workflow refused (a bad key, limit or ttl): the message says which value and why. */
export class LeaseRequestError extends Error {
  override readonly name = 'LeaseRequestError';
}

/** Checks a key before it names a workflow. @throws LeaseRequestError naming the key and the rule */
export function checkLeaseKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_LEASE_KEY_LENGTH || /[\u0000-\u001f\u007f]/.test(key)) {
    throw new LeaseRequestError(`lease key ${JSON.stringify(key)} must be 1 to ${MAX_LEASE_KEY_LENGTH} characters without control characters`);
  }
}

/** Whether a request failed because the key's workflow is closed or was never started: it holds nothing. */
export function closedOrMissing(err: unknown): boolean {
  if (err instanceof WorkflowNotFoundError) return true;
  const text = err instanceof Error ? `${err.name} ${err.message}` : '';
  return /not found|already completed|workflow execution.*(completed|closed)/i.test(text);
}
