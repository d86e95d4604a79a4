import { activityInfo, cancellationSignal, Context } from '@temporalio/activity';
import { TemplateError } from '../../pipeline/template.js';
import type { StageResult } from '../../pipeline/stage-result.js';
import { stageFailure } from '../failures.js';
import type { StageAttemptInput } from '../../contracts/stage-attempt.js';
import { holdLeases, LeaseClient, LeaseRequestError, type LeaseRequest } from './lease-client.js';
import { WaitReports } from './wait-reports.js';
import { heartbeatWhileWaiting } from './waiting-heartbeats.js';
import { executionInfo } from '../owner/stage-execution.js';

/**
 * Wraps the stage activity: an attempt of a stage with `limits:` takes its keys (in sorted order) before anything
 * else, waiting first come first served while a key is full, heartbeating all the while; it renews them while it
 * runs and gives them back however it ends. The lease is per attempt with the stage's heartbeat timeout as its time
 * limit: Temporal retries an attempt on the server, so the workflow never sees one attempt die, but the attempt's
 * renewals stop with its heartbeats and the key goes to the next waiter within that time.
 */
export function withStageLeases(runStage: (input: StageAttemptInput) => Promise<StageResult>): (input: StageAttemptInput) => Promise<StageResult> {
  return async (input) => {
    if (!input.leases?.length) return runStage(input);
    const info = executionInfo(activityInfo(), input.execution);
    const { workflowId, runId } = info.workflowExecution ?? { workflowId: input.runId, runId: 'local' };
    const holder = `${workflowId}/${input.stage.id}/${info.activityId}/${runId.slice(0, 8)}/${info.attempt}`;
    const label = `run ${workflowId} stage ${input.stage.id} attempt ${info.attempt}`;
    const requests: LeaseRequest[] = input.leases.map(({ key, concurrency }) => ({ key, limit: concurrency, holder, ttlMs: input.stage.heartbeatTimeoutMs, label }));
    const reports = new WaitReports(workflowId, input.stage.id);
    const leases = new LeaseClient(Context.current().client, info.taskQueue);
    // The earlier attempts' progress (cost, session) stays in the heartbeat for the next attempt to read.
    const stopHeartbeats = heartbeatWhileWaiting(info.heartbeatDetails);
    try {
      return await holdLeases(
        leases,
        requests,
        async () => {
          // The stage heartbeats its own progress from here.
          stopHeartbeats();
          await reports.over();
          return runStage(input);
        },
        { signal: cancellationSignal(), onWait: (wait) => reports.waiting(wait), pollMs: Math.min(10_000, Math.floor(input.stage.heartbeatTimeoutMs / 3)) },
      );
    } catch (err) {
      if (err instanceof LeaseRequestError || err instanceof TemplateError) {
        throw stageFailure({ type: 'CONFIG_INVALID', stageId: input.stage.id, message: `limits: ${err.message}`, hint: 'fix the `limits` key in the pipeline file or the run input it uses (a key is 1 to 200 characters), then start a new run' });
      }
      throw err;
    } finally {
      stopHeartbeats();
    }
  };
}
