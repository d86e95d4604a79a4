import { ActivityFailure, isCancellation, proxyActivities, TimeoutFailure, type ActivityOptions } from '@temporalio/workflow';
import type { PipelineActivities } from '../contracts/activities.js';
import type { RunOwnerClaim } from '../contracts/run-owner.js';
import { formatDuration } from '../pipeline/duration.js';
import type { RunTracker } from './run-tracker.js';

/**
 * Patch (issue 29): a run has one owner worker, claimed at its first activity; every stage, merge, delivery and the
 * closing of its workspace go to the owner's own task queue, and the run moves only when its owner is gone. Decided
 * once in the run's first task: runs recorded before keep the shared queue to their end.
 */
export const RUN_OWNER_PATCH = 'run-owner';

/** Any worker of the run's shared queue may answer: it becomes the owner. */
const { claimRunOwner } = proxyActivities<PipelineActivities>({ summary: 'claim an owner worker for the run', startToCloseTimeout: '1m', retry: { initialInterval: '1s', maximumInterval: '10s' } });

/** An activity call that failed because nobody took it from its queue within the window. */
export type NotStarted = ActivityFailure & { cause: TimeoutFailure };

/** Whether an activity never started because nobody took it from its queue within the window. */
export function notStarted(err: unknown): err is NotStarted {
  return err instanceof ActivityFailure && err.cause instanceof TimeoutFailure && err.cause.timeoutType === 'SCHEDULE_TO_START';
}

/** The options that send an activity to the owner: its queue, and how long it may wait there before the owner is checked. */
export function onOwner(owner: RunOwnerClaim, options: ActivityOptions): ActivityOptions {
  return { ...options, taskQueue: owner.taskQueue, scheduleToStartTimeout: owner.windowMs };
}

/**
 * The worker that holds the run (Temporal's worker-specific task queues, as in its file-processing samples). Claimed on
 * first use and shared by stages that start together; an activity its queue does not start within the owner's window
 * makes the run ping the owner on its always-free ping queue: a busy owner answers and the activity waits again, a gone
 * one does not, and the run moves to whichever worker claims it next (exactly once, however many stages noticed).
 */
export class RunOwner {
  private claiming?: Promise<RunOwnerClaim>;

  constructor(
    private readonly tracker: RunTracker,
    private claim: RunOwnerClaim | undefined,
  ) {}

  /** What the next execution of the run carries over. */
  snapshot(): RunOwnerClaim | undefined {
    return this.claim;
  }

  /** The run's owner, claimed the first time. */
  current(): Promise<RunOwnerClaim> {
    if (this.claim) return Promise.resolve(this.claim);
    this.claiming ??= claimRunOwner(this.tracker.ref()).then((claim) => {
      this.claim = claim;
      this.claiming = undefined;
      return claim;
    });
    return this.claiming;
  }

  /**
   * Runs `call` on the owner's queue. When its queue does not start it within the window: a live owner gets it again,
   * a gone one is replaced. `onMissed` hears of every call that did not start (a stage carries its execution on).
   */
  async run<T>(what: string, call: (owner: RunOwnerClaim) => Promise<T>, onMissed?: (err: NotStarted) => void): Promise<T> {
    for (;;) {
      const owner = await this.current();
      try {
        return await call(owner);
      } catch (err) {
        if (!notStarted(err)) throw err;
        onMissed?.(err);
        if (!(await this.alive(owner))) await this.moveFrom(owner, what);
      }
    }
  }

  /** Whether the owner answers on its ping queue within its window. */
  private async alive(owner: RunOwnerClaim): Promise<boolean> {
    // A claim of a gone owner may have been replaced while this call waited: the new one is asked next time round.
    if (this.claim && this.claim.taskQueue !== owner.taskQueue) return true;
    const { pingRunOwner } = proxyActivities<PipelineActivities>({
      ...onOwner({ ...owner, taskQueue: owner.pingQueue }, { summary: `ping the run's owner ${owner.identity}`, startToCloseTimeout: owner.windowMs }),
      retry: { maximumAttempts: 1 },
    });
    try {
      await pingRunOwner();
      return true;
    } catch (err) {
      if (isCancellation(err)) throw err;
      return false;
    }
  }

  /** Gives the run to another worker, unless another call already did. */
  private async moveFrom(gone: RunOwnerClaim, what: string): Promise<void> {
    if (this.claim?.taskQueue !== gone.taskQueue) return;
    this.claim = undefined;
    const next = await this.current();
    this.tracker.warn(
      `the run moved from worker ${gone.identity} to ${next.identity}: ${what} waited ${formatDuration(gone.windowMs)} on its queue and the worker did not answer (it stopped or lost its connection); work since the last checkpoint may be redone`,
    );
  }
}
