import type { Info } from '@temporalio/activity';
import type { StageExecution } from '../../contracts/run-owner.js';

/**
 * The activity's `Info` as the stage execution sees it. In a run with an owner, an execution may span activities (a
 * fallback on another worker is a new activity), so its attempts count on from the ones it made before, its log is keyed
 * by the execution's id rather than the activity's, its first attempt reads what the earlier ones left (session, cost,
 * the last failure) from the input as if from a heartbeat, and the run's lease workflows stay on the run's queue.
 */
export function executionInfo(info: Info, execution: StageExecution | undefined): Info {
  if (!execution) return info;
  const carried = info.heartbeatDetails === undefined && execution.attemptsBefore > 0 ? carriedProgress(execution) : info.heartbeatDetails;
  return {
    ...info,
    attempt: execution.attemptsBefore + info.attempt,
    activityId: execution.id,
    heartbeatDetails: carried,
    taskQueue: execution.runQueue,
  };
}

/** What the last heartbeat of the earlier owner said, as the workflow carried it. */
function carriedProgress(execution: StageExecution): Record<string, unknown> {
  return {
    ...(execution.sessionId ? { sessionId: execution.sessionId } : {}),
    costUsd: execution.costUsd ?? 0,
    ...(execution.usage ? { usage: execution.usage } : {}),
    turns: 0,
    lastEventAt: 0,
  };
}
