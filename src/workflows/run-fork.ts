import { ActivityFailure, ApplicationFailure, proxyActivities, type ActivityOptions } from '@temporalio/workflow';
import type { PipelineActivities } from '../contracts/activities.js';
import { FORK_REFUSED, type ForkTakeOver, type RunForkRequest } from '../contracts/run-fork.js';
import { onOwner, type RunOwner } from './run-owner.js';
import type { RunTracker } from './run-tracker.js';

/*
 * A fork's first step (docs/forking.md), before any stage: the worker that will hold the run checks the fork against
 * the source run, lays out the workspace from the source's checkpoint, and says which stages are taken over. Only a
 * run whose input asks for a fork calls it, so no recorded history meets it.
 */

const OPTIONS: ActivityOptions = {
  summary: 'prepare the fork from its source run',
  // Downloading and unpacking the source's checkpoint: bounded by the checkpoint cap, heartbeating meanwhile.
  startToCloseTimeout: '30m',
  heartbeatTimeout: '1m',
  retry: { initialInterval: '1s', maximumInterval: '30s', maximumAttempts: 5, nonRetryableErrorTypes: [FORK_REFUSED] },
};
const { prepareFork } = proxyActivities<PipelineActivities>(OPTIONS);

/**
 * Takes over the source's stages into `tracker` (and their sessions into `sessions`), on the run's owner when it has
 * one: the workspace is laid out where the stages will run.
 * @throws ApplicationFailure FORK_REFUSED (or the activity's last failure), after ending the run's state with it
 */
export async function takeOverFork(fork: RunForkRequest, tracker: RunTracker, sessions: Map<string, string>, owner: RunOwner | undefined): Promise<void> {
  const input = { ...tracker.ref(), fork };
  let prepared: ForkTakeOver;
  try {
    prepared = owner ? await owner.run('prepare the fork', (claim) => proxyActivities<PipelineActivities>(onOwner(claim, OPTIONS)).prepareFork(input)) : await prepareFork(input);
  } catch (err) {
    const cause = err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? err.cause : undefined;
    const error = { type: cause?.type ?? FORK_REFUSED, message: cause?.message ?? (err instanceof Error ? err.message : String(err)) };
    tracker.finish('failed', error);
    throw ApplicationFailure.create({ ...error, nonRetryable: true });
  }
  const source = prepared.sourceFirstExecutionRunId === undefined ? {} : { firstExecutionRunId: prepared.sourceFirstExecutionRunId };
  tracker.takeOver({ runId: fork.runId, ...source, stage: prepared.from, ...(fork.force ? { forced: true } : {}) }, prepared.stages);
  for (const [stage, sessionId] of prepared.sessions) sessions.set(stage, sessionId);
  for (const warning of prepared.warnings) tracker.warn(warning);
}
