import type { TokenUsage } from '../pipeline/stage-result.js';

/*
 * One owner per run: a run's stages share one workspace, so every activity that touches it goes to the worker holding
 * the run, on that worker's own task queue (Temporal's worker-specific task queues). Shared by the workflow (which
 * schedules on the owner's queue and moves the run when its owner is gone) and the activities (which claim a run and
 * carry a stage execution across a move).
 */

/** The worker that holds a run, as its `claimRunOwner` activity answers. */
export interface RunOwnerClaim {
  /** The worker's own task queue: the run's stages, merges, delivery and closing go there. */
  taskQueue: string;
  /** A second queue of the worker's, always free, that answers `pingRunOwner` (a busy owner still answers it). */
  pingQueue: string;
  /** The worker's identity (`pid@host`), for `status` and the Web UI. */
  identity: string;
  /**
   * How long an activity may wait on the owner's queue, and the ping for an answer, before the owner counts as gone
   * (`AGENT_PIPELINE_OWNER_TIMEOUT`). @unit milliseconds
   */
  windowMs: number;
}

/**
 * One execution of a stage (a round, or a call a person's answer or retry made) as it travels from one activity to the
 * next when its run moves: a fallback is a new activity, so what a retry needs comes in its input, and the attempt's log
 * is keyed by `id`, not by the activity's id.
 */
export interface StageExecution {
  /** Made by the workflow when the execution starts; the same in every activity of the execution. */
  id: string;
  /** Attempts the execution made before this activity (on the worker that was its owner). */
  attemptsBefore: number;
  /** The agent session to resume, from the last heartbeat or failure the workflow saw. */
  sessionId?: string;
  /** What the earlier attempts spent. @unit US dollars */
  costUsd?: number;
  usage?: TokenUsage;
  /** How the last attempt before the move ended, for `{{previous.failed}}`. */
  lastFailure?: { type: string; message: string };
  /** The task queue of the worker that ran the run before: the lease workflows of `limits:` live on the run's queue. */
  runQueue: string;
}
