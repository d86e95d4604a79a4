import { defineSignal } from '@temporalio/workflow';

/**
 * What a stage attempt (or the run) waiting for a concurrency key tells its run, so that `status`, `list` and the
 * library say what it waits for and how many are ahead. Sent by the activity that waits, only when the position
 * changes (so the run's history grows with the waiters ahead, not with time); `key` absent: the wait is over.
 */
export interface LeaseWaitReport {
  /** The waiting stage; absent for the run's own keys (pipeline `limits`). */
  stage?: string;
  key?: string;
  /** Waiters before this one. */
  ahead?: number;
  /** Holders of the key now, and its limit. */
  holders?: number;
  limit?: number;
}

export const leaseWaitSignal = defineSignal<[LeaseWaitReport]>('leaseWait');

/** The memo key `list` reads what a run's stages (or the run) wait for from: `[{ stage?, key, ahead }]`. */
export const LEASE_WAITS_MEMO_KEY = 'agentPipelineLeaseWaits';
