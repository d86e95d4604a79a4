import { isGrpcServiceError, type Client } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import type { ScheduleIdentity } from './signatures.js';
import { GRPC_STATUS } from '../grpc-errors.js';
import { agentPipelineCommand } from '../pipeline/shell-words.js';

/*
 * Which schedule started a run, asked of Temporal itself. A schedule's signed action is the same input for every run
 * it starts, so anyone who reads one of those runs holds a signed input: started by hand (under any id, with any
 * search attributes) it must not run. A run is the schedule's own when the schedule that `TemporalScheduledById`
 * names exists, is not paused, and lists this very run (workflow id and run id) among its recent or running actions;
 * the search attribute alone proves nothing (a client may set it on a start).
 */

/** Temporal's search attribute naming the schedule that started a run. */
export const SCHEDULED_BY_ATTRIBUTE = 'TemporalScheduledById';

/** How long to look for the run among the schedule's actions, and how often. @unit milliseconds */
export interface ScheduleOriginOptions {
  /**
   * The schedule records the run it started a moment after starting it; the run's first task may come first.
   * @default 5000
   */
  waitMs?: number;
  /** @default 200 */
  pollMs?: number;
  /** Sleeps between polls (an activity's own sleep, so a cancelled check stops). */
  sleep(ms: number): Promise<void>;
}

/** The run whose origin is asked about: its workflow id and the id of its first execution. */
export interface RunExecution {
  workflowId: string;
  runId: string;
}

/** The schedule that started the run, or why the run is not a schedule's action. */
export async function findScheduleOrigin(client: Client, run: RunExecution, options: ScheduleOriginOptions): Promise<ScheduleIdentity | { refused: string }> {
  const scheduleId = await readScheduledBy(client, run);
  if (!scheduleId) return { refused: `its signature is a schedule's, and run ${run.workflowId} was not started by a schedule (it has no ${SCHEDULED_BY_ATTRIBUTE}); a schedule's signed action runs only as that schedule's action` };
  const deadline = Date.now() + (options.waitMs ?? 5_000);
  for (;;) {
    const schedule = await describeSchedule(client, scheduleId);
    if (!schedule) return { refused: `its signature is a schedule's, and schedule ${scheduleId} (its ${SCHEDULED_BY_ATTRIBUTE}) no longer exists; a deleted schedule starts no runs` };
    if (schedule.paused) return { refused: `its signature is a schedule's, and schedule ${scheduleId} is paused; unpause it (${agentPipelineCommand('schedule unpause', scheduleId)}) and let it start the run` };
    if (schedule.runs.some((r) => r.workflowId === run.workflowId && r.runId === run.runId)) return { scheduleId, createdAt: schedule.createdAt };
    if (Date.now() >= deadline) {
      return { refused: `its signature is a schedule's, and run ${run.workflowId} is not among the runs schedule ${scheduleId} started: its input was copied from a scheduled run and started by hand` };
    }
    await options.sleep(options.pollMs ?? 200);
  }
}

/** The run's `TemporalScheduledById`, read from the server (never from what the run's starter sent in its input). */
async function readScheduledBy(client: Client, run: RunExecution): Promise<string | undefined> {
  const described = await client.workflowService.describeWorkflowExecution({ namespace: client.options.namespace, execution: run });
  const payload = described.workflowExecutionInfo?.searchAttributes?.indexedFields?.[SCHEDULED_BY_ATTRIBUTE];
  if (!payload) return undefined;
  const value = defaultPayloadConverter.fromPayload<unknown>(payload as Payload);
  // A keyword; servers of old kept keywords as lists.
  const id = Array.isArray(value) ? value[0] : value;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/** What the check needs of a schedule: pause state, creation time, the runs it started lately and those still running. */
async function describeSchedule(client: Client, scheduleId: string): Promise<{ paused: boolean; createdAt: number; runs: RunExecution[] } | undefined> {
  try {
    const { schedule, info } = await client.workflowService.describeSchedule({ namespace: client.options.namespace, scheduleId });
    const started = [...(info?.recentActions ?? []).map((a) => a.startWorkflowResult), ...(info?.runningWorkflows ?? [])];
    return {
      paused: schedule?.state?.paused === true,
      createdAt: timestampMs(info?.createTime),
      runs: started.flatMap((r) => (r?.workflowId && r.runId ? [{ workflowId: r.workflowId, runId: r.runId }] : [])),
    };
  } catch (err) {
    // The schedule was deleted (or never existed).
    if (isGrpcServiceError(err) && err.code === GRPC_STATUS.NOT_FOUND) return undefined;
    throw err;
  }
}

/** A protobuf timestamp in milliseconds, as the client library converts it (`ScheduleDescription.info.createdAt`). */
function timestampMs(ts: { seconds?: number | { toNumber(): number } | null; nanos?: number | null } | null | undefined): number {
  const seconds = ts?.seconds == null ? 0 : typeof ts.seconds === 'number' ? ts.seconds : ts.seconds.toNumber();
  return seconds * 1000 + Math.floor((ts?.nanos ?? 0) / 1e6);
}
