import { activityInfo } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { RunOwnerClaim } from '../../contracts/run-owner.js';
import type { RunRef } from '../../pipeline/run-state.js';
import { settledWithin } from '../settled-within.js';

/**
 * Where a run's checkpoint says its folder is, when this worker would put it elsewhere (another
 * `AGENT_PIPELINE_WORKSPACES`): it could not resume the run's sessions there. Undefined when it can hold the run.
 */
export type RunElsewhere = (run: RunRef) => Promise<string | undefined>;

/** How many times a worker declines a run whose checkpoint is under another workspaces path before it takes it. */
const DECLINES = 12;
/** How long the claim waits for the store's answer before it takes the run anyway. @unit milliseconds */
const ELSEWHERE_ANSWER_MS = 10_000;

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
export function createOwnerActivities(owner: OwnerSettings | undefined, running: () => number, elsewhere: RunElsewhere = async () => undefined) {
  return {
    async claimRunOwner(run: RunRef): Promise<RunOwnerClaim> {
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
      await declineIfElsewhere(owner, run, elsewhere);
      return owner.claim;
    },
    async pingRunOwner(): Promise<string> {
      return owner?.claim.identity ?? 'the shared queue';
    },
  };
}

/**
 * A run moving to a new owner (its host lost) goes on from its checkpoint, which only a worker with the same workspaces
 * path can resume: a worker with another path lets the claim go round to one that has it. After {@link DECLINES}
 * rounds (about a minute) with no such worker, it takes the run, and the stage fails naming both paths. A store that
 * does not answer in time is no reason to decline.
 */
async function declineIfElsewhere(owner: OwnerSettings, run: RunRef, elsewhere: RunElsewhere): Promise<void> {
  if (activityInfo().attempt > DECLINES) return;
  const answer = await settledWithin(elsewhere(run), ELSEWHERE_ANSWER_MS);
  const runDir = answer?.status === 'fulfilled' ? answer.value : undefined;
  if (runDir === undefined) return;
  throw ApplicationFailure.create({
    type: 'OWNER_ELSEWHERE',
    message: `worker ${owner.claim.identity} would put the run outside ${runDir}, where its checkpoint was taken (another AGENT_PIPELINE_WORKSPACES): a worker with that path may claim the run`,
    nextRetryDelay: '2s',
  });
}
