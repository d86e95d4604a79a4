import { activityInfo, cancellationSignal, Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { LeaseClient, LeaseRequestError, type Lease } from './lease-client.js';
import { WaitReports } from './wait-reports.js';
import { heartbeatWhileWaiting } from './waiting-heartbeats.js';
import type { RunLeasesInput } from '../../contracts/activities.js';

/** How long one request waits in the key's workflow before it answers with the run's place (and heartbeats). @unit milliseconds */
export const RUN_LEASE_POLL_MS = 10_000;

/**
 * Takes the run's keys, in sorted order, waiting first come first served while one is full and heartbeating while
 * it waits. They are held for the run's life: no time limit, given back by `releaseRunLeases` when the run ends.
 * Asking again is idempotent, so a retry of this activity (its worker died) keeps its place in each queue.
 * @throws CONFIG_INVALID for a key the lease workflow refuses; the cancellation, with the keys taken so far given back
 */
export async function acquireRunLeases(input: RunLeasesInput, pollMs = RUN_LEASE_POLL_MS): Promise<string[]> {
  const leases = new LeaseClient(Context.current().client, activityInfo().taskQueue);
  const reports = new WaitReports(input.runId, undefined);
  const held: Lease[] = [];
  const stopHeartbeats = heartbeatWhileWaiting(undefined);
  try {
    for (const { key, concurrency } of input.keys) {
      held.push(
        await leases.acquire(
          { key, limit: concurrency, holder: input.holder, label: `run ${input.runId}`, run: input.runId },
          { signal: cancellationSignal(), onWait: (wait) => reports.waiting(wait), pollMs },
        ),
      );
    }
    await reports.over();
    return held.map((lease) => lease.key);
  } catch (err) {
    if (cancellationSignal().aborted) await Promise.all(held.map((lease) => lease.release().catch(() => undefined)));
    if (err instanceof LeaseRequestError) throw ApplicationFailure.create({ type: 'CONFIG_INVALID', message: `[CONFIG_INVALID] pipeline limits: ${err.message}`, nonRetryable: true });
    throw err;
  } finally {
    stopHeartbeats();
  }
}

/** Gives back the run's keys (and leaves any queue it is still in); a key it does not hold is no error. */
export async function releaseRunLeases(input: { holder: string; keys: string[] }): Promise<void> {
  const leases = new LeaseClient(Context.current().client, activityInfo().taskQueue);
  await Promise.all(input.keys.map((key) => leases.release(key, input.holder)));
}
