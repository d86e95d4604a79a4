import { ActivityCancellationType, ApplicationFailure, CancellationScope, isCancellation, patched, proxyActivities, upsertMemo, workflowInfo } from '@temporalio/workflow';
import type { PipelineActivities } from '../contracts/activities.js';
import { renderLimitKeys, type LeaseKey } from '../pipeline/limits.js';
import type { LeaseWaitState } from '../pipeline/run-state.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import { LEASE_WAITS_MEMO_KEY, leaseWaitSignal, type LeaseWaitReport } from '../contracts/lease-wait.js';
import { findReplayProblem, findSealProblem, sealTimeOf } from '../contracts/message-seal.js';
import { cameUnencrypted } from '../contracts/payload-origin.js';
import type { PipelineRunInput } from '../contracts/messages.js';
import type { RunTracker } from './run-tracker.js';

/** The most waits the memo lists; a run with more waits still shows them all in `status`. */
const MAX_MEMO_WAITS = 10;

/**
 * Patch: a `leaseWait` report no key holder wrote (with encryption), sealed for another message or run, of the wrong
 * shape, or a copy of one taken (sealed no later than the last report taken for its stage) is ignored. Called only
 * when a report would be ignored, so histories recorded before, which took every report, replay as they were.
 */
export const LEASE_WAIT_SEAL_PATCH = 'lease-wait-reports-sealed';

const { acquireRunLeases } = proxyActivities<PipelineActivities>({
  // The run waits as long as the keys are busy; the pipeline `timeout` or a cancel ends the wait.
  startToCloseTimeout: '3650d',
  // The activity heartbeats at every answer of the key's workflow (every 10 s); a dead worker's wait is retried.
  heartbeatTimeout: '1m',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
  // The queues are left before the run goes on ending.
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
});
const { releaseRunLeases } = proxyActivities<PipelineActivities>({ startToCloseTimeout: '1m', retry: { maximumAttempts: 10, maximumInterval: '30s' } });

/**
 * The run's side of concurrency keys (docs/limits.md): renders the keys, takes the pipeline's keys for the run's
 * life and gives them back when it ends, and keeps what the run and its stages wait for in the state `status`
 * reads and in the memo `list` reads. A pipeline without `limits:` costs nothing: no activity, no memo.
 */
export class RunLimits {
  private held: string[] | undefined;
  /** The waits last written to the memo, as JSON, so an unchanged list is not written again. */
  private publishedWaits = '';
  private readonly holder: string;
  /** Per stage ('' for the run): when the newest sealed report taken for it was sent. Not carried across continue-as-new. */
  private readonly reportSeals = new Map<string, number>();

  constructor(
    private readonly input: PipelineRunInput,
    private readonly tracker: RunTracker,
    private readonly publish: () => void,
    carried: string[] | undefined,
  ) {
    this.held = carried;
    // The same in every execution of the run, so a continued run still holds what its first execution took.
    this.holder = `${workflowInfo().workflowId}/${workflowInfo().firstExecutionRunId}`;
  }

  /** The keys the run holds, for its next execution. */
  heldKeys(): string[] | undefined {
    return this.held;
  }

  /** A stage's keys, rendered and sorted, or the failure that makes a bad key the stage's end. */
  stageKeys(stage: ResolvedStage): LeaseKey[] | { type: string; message: string } | undefined {
    if (!stage.limits?.length) return undefined;
    try {
      return renderLimitKeys(stage.limits, this.run(), `stage ${stage.id}`);
    } catch (err) {
      return { type: 'CONFIG_INVALID', message: `[CONFIG_INVALID] ${(err as Error).message}` };
    }
  }

  /**
   * Takes the pipeline's keys (once: a continued run carries them), waiting first come first served.
   * @returns the failure when a key is bad; undefined when held, or when the wait was cancelled (the run is ending)
   */
  async acquire(): Promise<{ type: string; message: string } | undefined> {
    const limits = this.input.pipeline.limits;
    // No patch: only runs whose pipeline has `limits:` take this path, and no run started before the field existed has
    // it (the pipeline schema is strict), so no recorded history reaches it.
    if (!limits?.length || this.held) return undefined;
    let keys: LeaseKey[];
    try {
      keys = renderLimitKeys(limits, this.run(), 'pipeline');
    } catch (err) {
      return { type: 'CONFIG_INVALID', message: `[CONFIG_INVALID] ${(err as Error).message}` };
    }
    try {
      this.held = await acquireRunLeases({ runId: workflowInfo().workflowId, holder: this.holder, keys });
    } catch (err) {
      // Cancelled: whatever was taken was given back by the activity; the run ends as it was going to.
      if (isCancellation(err)) return undefined;
      const cause = err instanceof Error && err.cause instanceof ApplicationFailure ? err.cause : undefined;
      return { type: cause?.type ?? 'CONFIG_INVALID', message: cause?.message ?? String(err) };
    } finally {
      this.onWait({});
    }
    this.tracker.state.leases = this.held;
    this.publish();
    return undefined;
  }

  /** Gives the pipeline's keys back at the run's end (completed, failed, cancelled, timed out); not cancellable. */
  async release(): Promise<void> {
    const keys = this.held;
    if (!keys?.length) return;
    await CancellationScope.nonCancellable(() => releaseRunLeases({ holder: this.holder, keys }));
    this.held = undefined;
    this.tracker.state.leases = undefined;
  }

  /**
   * The `leaseWait` signal, which any client of the namespace can send (it changes only what `status` and `list` say
   * the run waits for): taken from a key holder's attempt, for this run, and newer than the last report taken for its
   * stage, so a report copied from history cannot bring back a wait that is over.
   */
  onWaitSignal(report: LeaseWaitReport): void {
    const target = typeof report?.stage === 'string' ? report.stage : '';
    const problem = reportProblem(report, this.tracker.state.stages) ?? findReplayProblem(sealTimeOf(report), this.reportSeals.get(target));
    if (problem !== undefined && patched(LEASE_WAIT_SEAL_PATCH)) return;
    const sentAt = sealTimeOf(report);
    if (problem === undefined && sentAt !== undefined) this.reportSeals.set(target, Math.max(sentAt, this.reportSeals.get(target) ?? sentAt));
    this.onWait(report);
  }

  /** What a waiting attempt (or the run's own wait) reports; `{ stage }` alone: its wait is over. */
  onWait(report: LeaseWaitReport): void {
    const state = this.tracker.state;
    const target = report.stage === undefined ? state : state.stages.find((s) => s.id === report.stage);
    if (!target) return;
    const before = target.leaseWait;
    if (report.key === undefined) {
      if (!before) return;
      delete target.leaseWait;
    } else {
      const since = before?.key === report.key ? before.since : Date.now();
      target.leaseWait = { key: report.key, ahead: report.ahead ?? 0, holders: report.holders ?? 0, limit: report.limit ?? 1, since } satisfies LeaseWaitState;
    }
    this.publishWaits();
  }

  /** A stage's round ended: any wait it reported is over (its attempt may have died while it waited). */
  stageEnded(stageId: string): void {
    this.onWait({ stage: stageId });
  }

  private publishWaits(): void {
    const state = this.tracker.state;
    const waits = [
      ...(state.leaseWait ? [{ key: state.leaseWait.key, ahead: state.leaseWait.ahead }] : []),
      ...state.stages.flatMap((s) => (s.leaseWait ? [{ stage: s.id, key: s.leaseWait.key, ahead: s.leaseWait.ahead }] : [])),
    ];
    const listed = waits.slice(0, MAX_MEMO_WAITS);
    // Only a changed list is written: each upsert is a history event, and most reports change only the status.
    const text = JSON.stringify(listed);
    if (text !== this.publishedWaits) {
      this.publishedWaits = text;
      upsertMemo({ [LEASE_WAITS_MEMO_KEY]: listed });
    }
    this.publish();
  }

  private run(): { id: string; pipeline: string; inputs: Record<string, string> } {
    return { id: this.tracker.state.runId, pipeline: this.input.pipeline.name, inputs: this.input.inputs };
  }
}

/** Why a `leaseWait` report is not taken from a key holder for this run, or undefined. */
function reportProblem(report: LeaseWaitReport, stages: readonly { id: string }[]): string | undefined {
  if (report === null || typeof report !== 'object') return 'not a report';
  if (cameUnencrypted(report)) return 'no key holder wrote it';
  const sealed = findSealProblem(report, leaseWaitSignal.name, workflowInfo().workflowId);
  if (sealed) return sealed;
  // Only the run's stages: a report's stage names an entry of the bounded map of seals.
  if (report.stage !== undefined && !stages.some((s) => s.id === report.stage)) return 'no such stage';
  if (report.key !== undefined && typeof report.key !== 'string') return 'its key is not text';
  const counts = [report.ahead, report.holders, report.limit];
  return counts.every((n) => n === undefined || Number.isFinite(n)) ? undefined : 'its counts are not numbers';
}
