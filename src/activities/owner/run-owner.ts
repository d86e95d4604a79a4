import { activityInfo } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { RunOwnerClaim } from '../../contracts/run-owner.js';

/** What a worker offers the runs it may claim: its own queues, and how many stages it runs at once. */
export interface OwnerSettings {
  claim: RunOwnerClaim;
  /** The worker's stage slots (`AGENT_PIPELINE_MAX_CONCURRENT_STAGES`). */
  slots: number;
}

/**
 * The worker's side of one owner per run (contracts/run-owner.ts): `claimRunOwner` runs on the run's shared queue and
 * answers this worker's own queues, `pingRunOwner` runs on its ping queue and says it is alive. `running`: the stage
 * attempts running on this worker now.
 */
export function createOwnerActivities(owner: OwnerSettings | undefined, running: () => number) {
  return {
    async claimRunOwner(): Promise<RunOwnerClaim> {
      // A worker built without its own queues (activities made by hand, in a test) keeps the run on the shared queue:
      // the run then behaves as before owners existed.
      if (!owner) return { taskQueue: activityInfo().taskQueue, pingQueue: activityInfo().taskQueue, identity: 'the shared queue', windowMs: 60_000 };
      // A worker whose stage slots are all taken lets another one have the run: its stages would only queue here. When
      // every worker is full, the claim goes round until a slot frees, as the stage would have waited for one anyway.
      if (running() >= owner.slots) {
        throw ApplicationFailure.create({
          type: 'OWNER_BUSY',
          message: `worker ${owner.claim.identity} runs ${running()} stages, its limit (AGENT_PIPELINE_MAX_CONCURRENT_STAGES): another worker may claim the run`,
          nextRetryDelay: '1s',
        });
      }
      return owner.claim;
    },
    async pingRunOwner(): Promise<string> {
      return owner?.claim.identity ?? 'the shared queue';
    },
  };
}
