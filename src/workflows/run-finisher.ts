import { ApplicationFailure, CancellationScope, CancelledFailure, isCancellation, patched } from '@temporalio/workflow';
import { DELIVERY_STAGE_ID } from '../pipeline/delivery-stage.js';
import { isTimeoutFailure, type RunState } from '../pipeline/run-state.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { RunDeliveryOutcome } from '../pipeline/template.js';
import type { RunDelivery } from './delivery.js';
import type { RunTracker } from './run-tracker.js';
import type { StageRunner } from './stage-runner.js';
import type { StageScheduler } from './stage-scheduler.js';

/**
 * Runs that push and have `finally` stages deliver first, so those stages see how the delivery went. Runs started
 * before kept the old order (finally stages, then the push) and still replay.
 */
export const FINALLY_AFTER_DELIVERY_PATCH = 'finally-after-delivery';

/** What the {@link RunFinisher} works with; owned by the PipelineRun. */
export interface RunFinisherOptions {
  tracker: RunTracker;
  runner: StageRunner;
  delivery: RunDelivery;
  /** Holds the run's first failure, which decides how the run ends; the delivery's failure is added to it. */
  scheduler: StageScheduler;
  /** The pipeline's `finally:` stages, run one after another once the run has ended. */
  finallyStages: ResolvedStage[];
  publish(): void;
}

/**
 * Ends a run once no stage round is in flight: skips what never started, runs the `finally` stages and the delivery
 * (push, pull request, closing the workspace), then completes, fails or cancels the workflow with the final state.
 */
export class RunFinisher {
  constructor(private readonly options: RunFinisherOptions) {}

  private get failure(): { type: string; message: string } | undefined {
    return this.options.scheduler.failure;
  }

  /**
   * Ends the run and returns its final state.
   * @throws ApplicationFailure when the run failed (its `type` says why), CancelledFailure when it was cancelled.
   */
  async finish(): Promise<RunState> {
    const { tracker, delivery, finallyStages, publish } = this.options;
    let cancelled = CancellationScope.current().consideredCancelled;
    tracker.skipPending(cancelled ? 'the run was cancelled' : 'the run failed before it could start');
    // Only runs with both a push and finally stages call patched(), so other runs' histories carry no marker.
    const deliverFirst = finallyStages.length > 0 && delivery.active && patched(FINALLY_AFTER_DELIVERY_PATCH);
    if (deliverFirst) {
      await this.deliver(cancelled);
      cancelled = CancellationScope.current().consideredCancelled;
    }
    if (finallyStages.length > 0) await this.runFinallyStages(cancelled);
    if (delivery.active) {
      if (!deliverFirst) await this.deliver(cancelled);
      cancelled = CancellationScope.current().consideredCancelled;
      await delivery.close(cancelled ? 'cancelled' : this.failure ? 'failed' : 'completed');
    }
    if (cancelled) {
      tracker.finish('cancelled', { type: 'CANCELLED', message: 'the run was cancelled; work done so far is kept in the workspace' });
      publish();
      // A CancelledFailure makes Temporal record the run as cancelled rather than failed. Temporal keeps no details
      // for a cancelled run, so the report is the final state, which the status query and current details show.
      throw new CancelledFailure('the run was cancelled');
    }
    const failure = this.failure;
    if (failure) {
      tracker.finish(isTimeoutFailure(failure.type) ? 'timed_out' : 'failed', failure);
      publish();
      throw ApplicationFailure.create({ type: failure.type, message: failure.message, nonRetryable: true, details: [this.report()] });
    }
    const state = tracker.finish('completed');
    publish();
    return state;
  }

  /**
   * After the `finally` stages: pushes the run's branch when its stages completed (`workspace.push`). A cancel while
   * the push waits for a person ends the run as cancelled.
   */
  private async deliver(cancelled: boolean): Promise<void> {
    try {
      const failure = await this.options.delivery.push(cancelled || this.failure !== undefined);
      if (failure) this.options.scheduler.keepFailure(failure);
    } catch (err) {
      if (!isCancellation(err)) throw err;
      this.options.tracker.markCancelled(DELIVERY_STAGE_ID, { type: 'CANCELLED', message: 'the run was cancelled before its branch was pushed' });
    }
    this.options.publish();
  }

  /**
   * Runs the `finally:` stages one after another with how the run ended (`{{run.status}}`, `{{run.error}}`). A
   * cancelled run's scope is cancelled, so they run in a scope that ignores it; their failure is only a warning.
   */
  private async runFinallyStages(cancelled: boolean): Promise<void> {
    const { tracker, runner, finallyStages, publish } = this.options;
    const failure = this.failure;
    const status = cancelled ? 'cancelled' : failure ? (isTimeoutFailure(failure.type) ? 'timed_out' : 'failed') : 'completed';
    const error = cancelled ? 'the run was cancelled' : (failure?.message ?? '');
    // `{{run.error.type}}`: the failure's type (`AGENT_BLOCKED`, `PUSH_CONFLICT` …), empty when the run completed.
    const errorType = cancelled ? 'CANCELLED' : (failure?.type ?? '');
    runner.runEnd = { status, error, ...(runner.knobs ? { errorType } : {}), delivery: this.deliveryOutcome() };
    const scope = cancelled ? undefined : new CancellationScope();
    for (const stage of finallyStages) {
      const outcome = await (scope ? scope.run(() => runner.runRound(stage, 1)) : CancellationScope.nonCancellable(() => runner.runRound(stage, 1)));
      if (outcome.kind === 'failed' || outcome.kind === 'stop') tracker.warn(`finally stage ${stage.id} failed (the run's outcome stands): ${outcome.message}`);
      if (outcome.kind === 'cancelled') break;
      publish();
    }
    tracker.skipPending('the run was cancelled while its finally stages ran', true);
  }

  /** How the delivery went, as `finally` stages read it (`{{run.delivery.push}}` …); it has run before them. */
  private deliveryOutcome(): RunDeliveryOutcome {
    const { state } = this.options.tracker;
    const outputs = state.outputs ?? {};
    const push = state.stages.find((s) => s.id === DELIVERY_STAGE_ID);
    const pushed = push?.status === 'completed';
    return {
      push: !push ? 'none' : pushed ? 'pushed' : push.status === 'pending' ? 'skipped' : push.status,
      pullRequest: pushed ? (outputs.pullRequestUrl ?? '') : '',
      branch: pushed ? (outputs.branch ?? '') : '',
      url: pushed ? (outputs.pullRequestUrl ?? outputs.compareUrl ?? '') : '',
    };
  }

  /** A short account of how each stage ended, for the failure details. */
  private report(): { stages: { id: string; status: string; costUsd: number }[]; costUsd: number; workspace?: string } {
    const { stages, costUsd, workspace } = this.options.tracker.state;
    return { stages: stages.map((s) => ({ id: s.id, status: s.status, costUsd: s.totals?.costUsd ?? 0 })), costUsd, workspace };
  }
}
