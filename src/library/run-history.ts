import type { WorkflowExecutionDescription, WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import type { RunState, RunStatus, StageState } from '../pipeline/run-state.js';
import type { StageResult } from '../pipeline/stage-result.js';
import { needIds } from '../pipeline/graph.js';
import { resolveStage } from '../pipeline/stage-options.js';
import type { PipelineRunInput } from '../contracts/messages.js';

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;
type HistoryEvent = NonNullable<History['events']>[number];
type Failure = NonNullable<NonNullable<HistoryEvent['activityTaskFailedEventAttributes']>['failure']>;
type Timestamp = { seconds?: number | { toNumber(): number } | null; nanos?: number | null } | null | undefined;

/*
 * When no worker answers the status query (none is running, or the run is closed and nobody can replay it), the run
 * is rebuilt from its event history: the start input names the stages, and each stage attempt is an activity whose
 * input names its stage and whose result is the StageResult. Waits for a person are not in the history in a readable
 * form, so a rebuilt state never shows them; `status` says the state came from history.
 */

/** Decodes the first payload of a payload list, or undefined. */
export function decodeFirst<T>(payloads: { payloads?: Payload[] | null } | null | undefined): T | undefined {
  const first = payloads?.payloads?.[0];
  if (!first) return undefined;
  try {
    return defaultPayloadConverter.fromPayload<T>(first);
  } catch {
    return undefined;
  }
}

/** Converts a protobuf timestamp to milliseconds since the epoch. */
export function timestampMs(ts: Timestamp): number | undefined {
  if (!ts || ts.seconds == null) return undefined;
  const seconds = typeof ts.seconds === 'number' ? ts.seconds : ts.seconds.toNumber();
  return seconds * 1000 + Math.floor((ts.nanos ?? 0) / 1e6);
}

/**
 * Whether a stage started again (a review's rework) and its state does not say when it first started: a state recorded
 * by workflow code from before stages kept `firstStartedAt` (a run's final result, or a worker of that build).
 */
export function lacksFirstStart(stage: StageState): boolean {
  return (stage.round ?? 1) > 1 && stage.firstStartedAt === undefined && stage.carriedCostUsd === undefined;
}

/** `state`, with the first start `known` gives (stage id → ms since the epoch) for each stage that {@link lacksFirstStart}. */
export function withFirstStarts(state: RunState, known: ReadonlyMap<string, number>): RunState {
  if (!state.stages.some((s) => lacksFirstStart(s) && known.has(s.id))) return state;
  return { ...state, stages: state.stages.map((s) => (lacksFirstStart(s) && known.has(s.id) ? { ...s, firstStartedAt: known.get(s.id) } : s)) };
}

/** The stage (and review round) each activity of the run worked on, keyed by activity id. */
export function mapActivitiesToStages(events: readonly HistoryEvent[]): Map<string, { stageId: string; round?: number }> {
  const byActivity = new Map<string, { stageId: string; round?: number }>();
  for (const event of events) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (!scheduled?.activityId) continue;
    const input = decodeFirst<{ stage?: { id?: string }; round?: number }>(scheduled.input);
    if (input?.stage?.id) byActivity.set(scheduled.activityId, { stageId: input.stage.id, round: input.round });
  }
  return byActivity;
}

const CLOSED_STATUS: Record<string, RunStatus> = {
  COMPLETED: 'completed',
  FAILED: 'failed',
  TIMED_OUT: 'timed_out',
  TERMINATED: 'terminated',
  CANCELLED: 'cancelled',
};

/** Rebuilds the run's state from its history and description. */
export function rebuildRunState(history: History, description: WorkflowExecutionDescription): RunState {
  const builder = new RunStateBuilder();
  for (const event of history.events ?? []) builder.add(event);
  return builder.build(description);
}

/**
 * Rebuilds a run's state from its history events, fed oldest first one at a time, so a history read in pages never
 * sits in memory whole.
 */
export class RunStateBuilder {
  private input?: PipelineRunInput;
  private stages: StageState[] = [];
  private readonly scheduled = new Map<number, { stage: StageState; round?: number }>();
  private workspace?: string;
  /** The first execution's run id that names the run's folder (run-folders.ts), as the run's activities were sent it. */
  private firstExecutionRunId?: string;
  private costUsd = 0;
  /** When each stage first started, as far as this history tells (`null`: before it, and the carried state does not say). */
  private readonly firstStarts = new Map<string, number | null>();

  add(event: HistoryEvent): void {
    const startedRun = event.workflowExecutionStartedEventAttributes;
    if (startedRun) {
      this.start(decodeFirst<PipelineRunInput>(startedRun.input));
      return;
    }
    const at = timestampMs(event.eventTime);
    const s = event.activityTaskScheduledEventAttributes;
    if (s) {
      const attemptInput = decodeFirst<{ stage?: { id?: string }; round?: number; firstExecutionRunId?: unknown }>(s.input);
      // Every activity that touches the run's folder names it (its owner's claim first); a run started before names none.
      if (typeof attemptInput?.firstExecutionRunId === 'string') this.firstExecutionRunId ??= attemptInput.firstExecutionRunId;
      const stage = attemptInput?.stage?.id ? this.stages.find((st) => st.id === attemptInput.stage!.id) : undefined;
      if (stage) {
        this.scheduled.set(Number(event.eventId), { stage, round: attemptInput?.round });
        this.noteStart(stage, attemptInput?.round, at);
        Object.assign(stage, { status: 'running', startedAt: at, finishedAt: undefined, round: attemptInput?.round, error: undefined });
      }
      return;
    }
    const started = event.activityTaskStartedEventAttributes;
    if (started) {
      const entry = this.scheduled.get(Number(started.scheduledEventId));
      if (entry) entry.stage.attempt = started.attempt ?? undefined;
      return;
    }
    this.close(event, at);
  }

  /**
   * Keeps a stage's first start once it starts a new round (a review's rework), as the workflow's tracker does: a fork
   * from the stage plans from it, and a state rebuilt when no worker answers said only when the stage last started.
   */
  private noteStart(stage: StageState, round: number | undefined, at: number | undefined): void {
    if (!this.firstStarts.has(stage.id)) this.firstStarts.set(stage.id, at ?? null);
    const again = round !== undefined && stage.round !== undefined && round !== stage.round;
    const first = this.firstStarts.get(stage.id);
    if (again && first != null && stage.firstStartedAt === undefined && stage.carriedCostUsd === undefined) stage.firstStartedAt = first;
  }

  private start(input: PipelineRunInput | undefined): void {
    this.input = input;
    // A run that continued as new starts from the state its earlier executions handed over; this history adds the rest.
    const carried = input?.carryOver?.state;
    if (carried) {
      this.stages = structuredClone(carried.stages);
      // Absent, a stage's first start is its `startedAt`, unless a run recorded before the field reworked it.
      for (const s of this.stages) {
        if (s.startedAt !== undefined) this.firstStarts.set(s.id, s.firstStartedAt ?? ((s.round ?? 1) > 1 ? null : s.startedAt));
      }
      this.workspace = carried.workspace;
      this.firstExecutionRunId = carried.firstExecutionRunId;
      this.costUsd = carried.costUsd;
      return;
    }
    this.stages = [
      ...(input?.pipeline.stages ?? []).map((s) => resolveStage(input!.pipeline, s)),
      ...(input?.pipeline.finally ?? []).map((s) => resolveStage(input!.pipeline, s, true)),
    ].map((resolved) => ({ id: resolved.id, status: 'pending', backend: resolved.backend, model: resolved.model, ...(resolved.isFinally ? { finally: true } : {}) }));
  }

  /** An activity's end: completed, failed, timed out or cancelled. */
  private close(event: HistoryEvent, at: number | undefined): void {
    const completed = event.activityTaskCompletedEventAttributes;
    const failed = event.activityTaskFailedEventAttributes ?? event.activityTaskTimedOutEventAttributes;
    const cancelled = event.activityTaskCanceledEventAttributes;
    const scheduledId = completed?.scheduledEventId ?? failed?.scheduledEventId ?? cancelled?.scheduledEventId;
    const entry = scheduledId == null ? undefined : this.scheduled.get(Number(scheduledId));
    if (!entry) return;
    entry.stage.finishedAt = at;
    if (completed) {
      const result = decodeFirst<StageResult>(completed.result);
      entry.stage.result = result;
      entry.stage.status = result?.status === 'completed' || !result ? 'completed' : 'failed';
      // An agent that reported failure: the error the workflow records for it (stage-runner.ts), so that a state rebuilt
      // when the status query cannot answer (a busy worker) still says why the stage failed.
      if (result?.status === 'failed') entry.stage.error = { type: 'AGENT_REPORTED_FAILURE', message: `[AGENT_REPORTED_FAILURE] stage ${entry.stage.id}: ${result.error ?? result.summary}` };
      if (result) {
        entry.stage.attempt = result.attempt;
        this.costUsd += result.costUsd ?? 0;
        this.workspace ??= result.workspace;
      }
    } else if (failed) {
      entry.stage.status = 'failed';
      entry.stage.error = describeFailure(failed.failure);
    } else {
      entry.stage.status = 'cancelled';
    }
  }

  /**
   * What became of the stages that never ended in a closed run. Stopped from outside (terminated, cancelled), a stage
   * whose needs had all completed was ready (waiting for a person, or about to start): it was cancelled, as the status
   * query says of it; any other was skipped.
   */
  private settlePending(closed: RunStatus): void {
    const stopped = closed === 'terminated' || closed === 'cancelled';
    const completed = new Set(this.stages.filter((s) => s.status === 'completed').map((s) => s.id));
    const definitions = [...(this.input?.pipeline.stages ?? []), ...(this.input?.pipeline.finally ?? [])];
    for (const stage of this.stages) {
      if (stage.status !== 'pending') continue;
      const definition = definitions.find((d) => d.id === stage.id);
      const ready = stopped && !stage.finally && definition !== undefined && needIds(definition).every((id) => completed.has(id));
      stage.status = ready ? 'cancelled' : 'skipped';
    }
  }

  build(description: WorkflowExecutionDescription): RunState {
    const closed = CLOSED_STATUS[description.status.name];
    if (closed) this.settlePending(closed);
    const carried = this.input?.carryOver?.state;
    return {
      runId: description.workflowId,
      ...(this.firstExecutionRunId === undefined ? {} : { firstExecutionRunId: this.firstExecutionRunId }),
      pipeline: this.input?.pipeline.name ?? description.type,
      status: closed ?? 'running',
      inputs: this.input?.inputs ?? {},
      stages: this.stages,
      costUsd: this.costUsd,
      budgetUsd: carried ? carried.budgetUsd : this.input?.pipeline.budgetUsd,
      workspace: this.workspace,
      ...(carried?.warnings ? { warnings: carried.warnings } : {}),
      ...(carried?.reviews ? { reviews: carried.reviews } : {}),
      startedAt: carried?.startedAt ?? description.startTime.getTime(),
      finishedAt: description.closeTime?.getTime(),
    };
  }
}

/** The innermost failure, which is the activity's own (`CLI_CRASHED: …`) rather than Temporal's wrapper. */
function describeFailure(failure: Failure | null | undefined): { type: string; message: string } {
  let current: Failure | null | undefined = failure;
  while (current?.cause) current = current.cause;
  return { type: current?.applicationFailureInfo?.type || (current?.timeoutFailureInfo ? 'TIMEOUT' : 'ActivityFailure'), message: current?.message ?? 'the stage failed' };
}
