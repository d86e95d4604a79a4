import { activityInfo } from '@temporalio/activity';
import type { RunOwnerClaim } from '../../contracts/run-owner.js';

/**
 * The worker's side of one owner per run (contracts/run-owner.ts): `claimRunOwner` runs on the run's shared queue and
 * answers this worker's own queues, `pingRunOwner` runs on its ping queue and says it is alive.
 */
export function createOwnerActivities(owner: RunOwnerClaim | undefined) {
  return {
    async claimRunOwner(): Promise<RunOwnerClaim> {
      // A worker built without its own queues (activities made by hand, in a test) keeps the run on the shared queue:
      // the run then behaves as before owners existed.
      return owner ?? { taskQueue: activityInfo().taskQueue, pingQueue: activityInfo().taskQueue, identity: 'the shared queue', windowMs: 60_000 };
    },
    async pingRunOwner(): Promise<string> {
      return owner?.identity ?? 'the shared queue';
    },
  };
}
