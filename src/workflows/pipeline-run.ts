import { ApplicationFailure, CancellationScope, CancelledFailure, isCancellation, patched, sleep, workflowInfo } from '@temporalio/workflow';
import { ConditionSyntaxError, evaluateCondition, parseCondition } from '../pipeline/condition.js';
import { DELIVERY_STAGE_ID } from '../pipeline/delivery-stage.js';
import { toMilliseconds } from '../pipeline/duration.js';
import { findBlockedDependents, findReadyStages } from '../pipeline/graph.js';
import { isTimeoutFailure, type RunState } from '../pipeline/run-state.js';
import { resolveStage, type ResolvedStage } from '../pipeline/stage-options.js';
import type { RunDeliveryOutcome } from '../pipeline/template.js';
import { BudgetGuard } from './budget.js';
import { RunDelivery } from './delivery.js';
import type { PipelineRunInput, TemplateValues, TemplateValuesRequest } from '../contracts/messages.js';
import { ReviewLoop } from './review-loop.js';
import { CARRY_OVER_VERSION, type RunCarryOver } from '../contracts/run-carry-over.js';
import { handOverLimits, readCarryOver, type HandOverLimits } from './run-carry-over.js';
import { RunLimits } from './run-limits.js';
import { RunTracker } from './run-tracker.js';
import { StageRunner, type StageOutcome } from './stage-runner.js';
import { AgentPrompts } from './agent-prompts.js';
import { answerTemplateValues, TEMPLATE_VALUES_PATCH } from './template-values.js';
import { BOUNDED_STAGES_PATCH, RunVisibility } from './visibility.js';
import { HumanWaits } from './waits.js';
import { RunTrust } from './run-trust.js';

/**
 * Runs that started before continue-as-new existed kept starting stages however long their history grew; the marker
 * is recorded where a run first finds a hand-over due, so a replay of any earlier history takes the old path.
 */
const CONTINUE_AS_NEW_PATCH = 'continue-as-new';
/**
 * Patch: a stage's `retry:` shapes Temporal's retry policy of its activity, `onBlocked: fail` ends the run with
 * `AGENT_BLOCKED`, and `finally` stages get `{{run.error.type}}`. Runs recorded before it keep the fixed policy.
 */
export const STAGE_KNOBS_PATCH = 'knobs24-retry-policy-and-on-blocked';
/**
 * Patch: stages with `onPermissionRequest: ask` ask people mid-turn (agent-prompts.ts). Only runs with such a stage call
 * patched(), and such stages did not exist before, so every recorded history replays unchanged.
 */
export const MID_TURN_PROMPTS_PATCH = 'perm25-mid-turn-prompts';

/** How `run()` ends when the run goes on in a fresh execution: the state to hand over. */
export interface HandOver {
  handOver: RunCarryOver;
}

/**
 * Runs that push and have `finally` stages deliver first, so those stages see how the delivery went. Runs started
 * before kept the old order (finally stages, then the push) and still replay.
 */
export const FINALLY_AFTER_DELIVERY_PATCH = 'finally-after-delivery';

/**
 * The conductor of one run: starts stages as soon as what they need is satisfied (up to `concurrency` at
 * once; a stage waiting for a person keeps its slot), skips stages whose `when:` is false, sends reviewed work
 * back for rework, fails fast (cancelling running stages) unless a failed stage has `continueOnFailure`, and
 * bounds the whole run with the pipeline `timeout`.
 */
export class PipelineRun {
  readonly tracker: RunTracker;
  readonly waits: HumanWaits;
  readonly budget: BudgetGuard;
  /** Whom the run trusts to decide for it (signed decisions). */
  readonly trust: RunTrust;
  /** The pipeline's and the stages' concurrency keys (`limits:`), and what the run waits for among them. */
  readonly keys: RunLimits;
  readonly prompts: AgentPrompts;
  private readonly stages: ResolvedStage[];
  /** The pipeline's `finally:` stages, run one after another once the run has ended. */
  private readonly finallyStages: ResolvedStage[];
  private readonly visibility: RunVisibility;
  private readonly runner: StageRunner;
  private readonly delivery: RunDelivery;
  private readonly rounds: Map<string, number>;
  private readonly sessions: Map<string, string>;
  private readonly reviews: ReviewLoop;
  private readonly inFlight = new Map<string, Promise<void>>();
  private failure?: { type: string; message: string };
  /** When the pipeline `timeout` ends the run; carried across executions. @unit milliseconds since the epoch */
  private readonly deadlineAt?: number;
  /** Executions of the run so far, this one included. */
  private readonly executions: number;
  private readonly limits: HandOverLimits;
  /** Stage rounds that ended in this execution: a run hands over only after some progress, so it never loops. */
  private settledHere = 0;
  /** Set when a due hand-over found nothing left to run: the run ends in this execution. */
  private handOverDeclined = false;
  // Stages run in their own scope so that a failure or the timeout can stop them without cancelling the run.
  private readonly stageScope = new CancellationScope();

  constructor(
    private readonly input: PipelineRunInput,
    runId: string,
  ) {
    // Every piece of state an earlier execution handed over is read here, and only here (see RunCarryOver).
    const carried = readCarryOver(input.carryOver);
    this.stages = input.pipeline.stages.map((s) => resolveStage(input.pipeline, s));
    this.finallyStages = (input.pipeline.finally ?? []).map((s) => resolveStage(input.pipeline, s, true));
    this.tracker = new RunTracker(runId, input.pipeline.name, input.inputs, [...this.stages, ...this.finallyStages], input.pipeline.budgetUsd, carried?.state);
    // Decided once, in the run's first task: a patch checked first inside an update handler or a later task would not
    // line up with its marker on replay. Runs recorded before the patches keep the old behaviour to their end.
    const byReference = patched(TEMPLATE_VALUES_PATCH);
    this.visibility = new RunVisibility(this.tracker, patched(BOUNDED_STAGES_PATCH));
    this.waits = new HumanWaits(this.tracker, this.publish);
    const all = [...this.stages, ...this.finallyStages];
    const asks = all.some((s) => s.onPermissionRequest === 'ask') && patched(MID_TURN_PROMPTS_PATCH);
    this.prompts = new AgentPrompts(this.tracker, this.waits, (id) => all.find((s) => s.id === id), asks);
    this.budget = new BudgetGuard(this.tracker, this.waits, input.pipeline.onBudgetExceeded ?? 'ask');
    this.rounds = new Map(carried?.rounds);
    const sessions = (this.sessions = new Map(carried?.sessions));
    this.reviews = new ReviewLoop(this.stages, this.tracker, this.waits, (id) => sessions.get(id), carried?.reviews);
    const knobs = patched(STAGE_KNOBS_PATCH);
    this.keys = new RunLimits(input, this.tracker, this.publish, carried?.leases);
    this.runner = new StageRunner({ input, tracker: this.tracker, waits: this.waits, budget: this.budget, reviews: this.reviews, sessions, stages: this.stages, publish: this.publish, byReference, knobs, limits: this.keys, prompts: this.prompts });
    this.runner.runEnd = carried?.runEnd;
    this.delivery = new RunDelivery(input, this.tracker, this.waits, byReference);
    this.failure = carried?.failure;
    const timeout = input.pipeline.timeout;
    this.deadlineAt = carried ? carried.deadlineAt : timeout === undefined ? undefined : this.tracker.state.startedAt + toMilliseconds(timeout);
    this.executions = carried ? carried.executions + 1 : 1;
    this.limits = handOverLimits(input.pipeline.continueAsNew);
    this.trust = new RunTrust(carried?.trust);
  }

  /** The whole state of the run, for its next execution. Every field of RunCarryOver is filled here. */
  private carryOver(): RunCarryOver {
    return {
      version: CARRY_OVER_VERSION,
      state: this.tracker.state,
      rounds: [...this.rounds],
      sessions: [...this.sessions],
      reviews: this.reviews.snapshot(),
      failure: this.failure,
      runEnd: this.runner.runEnd,
      deadlineAt: this.deadlineAt,
      executions: this.executions,
      trust: this.trust.snapshot(),
      leases: this.keys.heldKeys(),
    };
  }

  readonly publish = (): void => this.visibility.publish();

  /** The template values a stage attempt asks for because its activity input left them out. */
  templateValues(request: TemplateValuesRequest): TemplateValues {
    return answerTemplateValues(this.tracker, this.stages, request);
  }

  /**
   * Runs every stage and returns the final state.
   * @throws ApplicationFailure when the run fails (its `type` says why), CancelledFailure when it was cancelled.
   */
  async run(): Promise<RunState | HandOver> {
    let outcome: RunState | HandOver | undefined;
    try {
      outcome = await this.conduct();
      return outcome;
    } finally {
      // The pipeline's keys are held for the run's life: given back however it ends, kept across a hand-over.
      if (!(outcome && 'handOver' in outcome)) await this.keys.release();
    }
  }

  private async conduct(): Promise<RunState | HandOver> {
    const timer = this.startTimeout();
    // The pipeline's `limits:` keys before any stage starts; the pipeline `timeout` counts the wait.
    const refused = await this.stageScope.run(() => this.keys.acquire());
    if (refused) this.fail(refused);
    for (;;) {
      // Once the history is long, no new stage starts: the rounds in flight (and their waits for people) finish,
      // then the run hands over to a fresh execution of itself.
      const handingOver = this.handOverDue();
      if (!handingOver && !this.failure && !this.stageScope.consideredCancelled) this.startReadyStages();
      if (this.inFlight.size === 0) {
        if (!handingOver) break;
        if (this.hasReadyStages()) {
          timer?.cancel();
          return { handOver: this.carryOver() };
        }
        this.handOverDeclined = true;
        continue;
      }
      await Promise.race(this.inFlight.values());
    }
    timer?.cancel();
    return await this.finish();
  }

  /**
   * Whether the run should continue as new: Temporal suggests it, or the history passed the pipeline's
   * `continueAsNew` limits. Read from the activation, so a replay decides the same. Never while the run is ending.
   * Behind the patch: a run recorded before hand-overs existed kept starting stages past these limits, and its
   * replay must too (the patch is false until the replay reaches new ground, where it records its marker).
   */
  private handOverDue(): boolean {
    if (this.handOverDeclined || this.settledHere === 0 || this.failure || this.stageScope.consideredCancelled) return false;
    const info = workflowInfo();
    const long = info.continueAsNewSuggested || info.historyLength >= this.limits.afterEvents || (info.historySize ?? 0) >= this.limits.afterBytes;
    return long && patched(CONTINUE_AS_NEW_PATCH);
  }

  private hasReadyStages(): boolean {
    return findReadyStages(this.stages, this.tracker.isStarted, this.tracker.isSatisfied).length > 0;
  }

  /**
   * After the `finally` stages: pushes the run's branch when its stages completed (`workspace.push`). A cancel while
   * the push waits for a person ends the run as cancelled.
   */
  private async deliver(cancelled: boolean): Promise<void> {
    try {
      const failure = await this.delivery.push(cancelled || this.failure !== undefined);
      if (failure) this.failure ??= failure;
    } catch (err) {
      if (!isCancellation(err)) throw err;
      this.tracker.markCancelled(DELIVERY_STAGE_ID, { type: 'CANCELLED', message: 'the run was cancelled before its branch was pushed' });
    }
    this.publish();
  }

  private startReadyStages(): void {
    const limit = this.input.pipeline.concurrency ?? Number.POSITIVE_INFINITY;
    for (let changed = true; changed; ) {
      changed = false;
      for (const id of findReadyStages(this.stages, this.tracker.isStarted, this.tracker.isSatisfied)) {
        if (this.failure) break;
        const stage = this.stages.find((s) => s.id === id)!;
        const holds = stage.when === undefined || this.conditionHolds(stage, stage.when);
        if (holds === 'invalid') break;
        if (!holds) {
          // Dependents still run: a stage skipped by its condition is a decision, not a failure.
          this.tracker.markSkipped(id, `condition \`${stage.when}\` is false`, true);
          changed = true;
        } else if (this.inFlight.size < limit) {
          this.launch(stage);
        }
      }
    }
    this.publish();
  }

  /** `when:` was checked when the file was loaded; a run started around that check fails the stage, not the worker. */
  private conditionHolds(stage: ResolvedStage, when: string): boolean | 'invalid' {
    try {
      return evaluateCondition(parseCondition(when), this.tracker.conditionContext());
    } catch (err) {
      if (!(err instanceof ConditionSyntaxError)) throw err;
      const message = `[CONDITION_INVALID] stage ${stage.id}: invalid \`when\`: ${err.message}`;
      this.tracker.markFailed(stage.id, { type: 'CONDITION_INVALID', message });
      this.fail({ type: 'CONDITION_INVALID', message });
      return 'invalid';
    }
  }

  private launch(stage: ResolvedStage): void {
    const round = this.rounds.get(stage.id) ?? 1;
    const done = this.stageScope
      .run(() => this.runner.runRound(stage, round))
      .then((outcome) => this.settle(stage, outcome))
      .finally(() => {
        this.settledHere++;
        this.inFlight.delete(stage.id);
        this.keys.stageEnded(stage.id);
        this.publish();
      });
    this.inFlight.set(stage.id, done);
  }

  private settle(stage: ResolvedStage, outcome: StageOutcome): void {
    switch (outcome.kind) {
      case 'rework':
        for (const id of outcome.stages) {
          this.rounds.set(id, (this.rounds.get(id) ?? 1) + 1);
          this.tracker.markPendingAgain(id);
        }
        return;
      case 'failed':
        if (!stage.continueOnFailure) return this.fail(outcome);
        // Stages that allow this failure (`needs: [{stage, allowFailure: true}]`) still run.
        for (const id of findBlockedDependents(this.stages, stage.id)) {
          if (this.tracker.stage(id).status === 'pending') this.tracker.markSkipped(id, `it needs ${stage.id}, which failed`, false);
        }
        this.tracker.warn(`stage ${stage.id} failed and the run went on (continueOnFailure): ${outcome.message}`);
        return;
      case 'stop':
        return this.fail(outcome);
      default:
        return;
    }
  }

  /** Fail fast: remember the first failure and stop every running or waiting stage. */
  private fail(failure: { type: string; message: string }): void {
    this.failure ??= { type: failure.type, message: failure.message };
    this.stageScope.cancel();
  }

  private startTimeout(): CancellationScope | undefined {
    const timeout = this.input.pipeline.timeout;
    if (timeout === undefined) return undefined;
    const scope = new CancellationScope();
    const message = `[PIPELINE_TIMEOUT] the run did not finish within its timeout (${timeout}); raise the pipeline's \`timeout\` if it needs longer`;
    // A continued run sleeps what is left of the deadline its first execution set.
    const ms = this.executions === 1 || this.deadlineAt === undefined ? toMilliseconds(timeout) : Math.max(1, this.deadlineAt - Date.now());
    void scope.run(() => sleep(ms, { summary: `pipeline timeout ${timeout}` })).then(
      () => this.fail({ type: 'PIPELINE_TIMEOUT', message }),
      () => undefined, // cancelled: the run ended first
    );
    return scope;
  }

  private async finish(): Promise<RunState> {
    let cancelled = CancellationScope.current().consideredCancelled;
    this.tracker.skipPending(cancelled ? 'the run was cancelled' : 'the run failed before it could start');
    // Only runs with both a push and finally stages call patched(), so other runs' histories carry no marker.
    const deliverFirst = this.finallyStages.length > 0 && this.delivery.active && patched(FINALLY_AFTER_DELIVERY_PATCH);
    if (deliverFirst) {
      await this.deliver(cancelled);
      cancelled = CancellationScope.current().consideredCancelled;
    }
    if (this.finallyStages.length > 0) await this.runFinallyStages(cancelled);
    if (this.delivery.active) {
      if (!deliverFirst) await this.deliver(cancelled);
      cancelled = CancellationScope.current().consideredCancelled;
      await this.delivery.close(cancelled ? 'cancelled' : this.failure ? 'failed' : 'completed');
    }
    if (cancelled) {
      this.tracker.finish('cancelled', { type: 'CANCELLED', message: 'the run was cancelled; work done so far is kept in the workspace' });
      this.publish();
      // A CancelledFailure makes Temporal record the run as cancelled rather than failed. Temporal keeps no details
      // for a cancelled run, so the report is the final state, which the status query and current details show.
      throw new CancelledFailure('the run was cancelled');
    }
    if (this.failure) {
      this.tracker.finish(isTimeoutFailure(this.failure.type) ? 'timed_out' : 'failed', this.failure);
      this.publish();
      throw ApplicationFailure.create({ type: this.failure.type, message: this.failure.message, nonRetryable: true, details: [this.report()] });
    }
    const state = this.tracker.finish('completed');
    this.publish();
    return state;
  }

  /**
   * Runs the `finally:` stages one after another with how the run ended (`{{run.status}}`, `{{run.error}}`). A
   * cancelled run's scope is cancelled, so they run in a scope that ignores it; their failure is only a warning.
   */
  private async runFinallyStages(cancelled: boolean): Promise<void> {
    const status = cancelled ? 'cancelled' : this.failure ? (isTimeoutFailure(this.failure.type) ? 'timed_out' : 'failed') : 'completed';
    const error = cancelled ? 'the run was cancelled' : (this.failure?.message ?? '');
    // `{{run.error.type}}`: the failure's type (`AGENT_BLOCKED`, `PUSH_CONFLICT` …), empty when the run completed.
    const errorType = cancelled ? 'CANCELLED' : (this.failure?.type ?? '');
    this.runner.runEnd = { status, error, ...(this.runner.knobs ? { errorType } : {}), delivery: this.deliveryOutcome() };
    const scope = cancelled ? undefined : new CancellationScope();
    for (const stage of this.finallyStages) {
      const outcome = await (scope ? scope.run(() => this.runner.runRound(stage, 1)) : CancellationScope.nonCancellable(() => this.runner.runRound(stage, 1)));
      if (outcome.kind === 'failed' || outcome.kind === 'stop') this.tracker.warn(`finally stage ${stage.id} failed (the run's outcome stands): ${outcome.message}`);
      if (outcome.kind === 'cancelled') break;
      this.publish();
    }
    this.tracker.skipPending('the run was cancelled while its finally stages ran', true);
  }

  /** How the delivery went, as `finally` stages read it (`{{run.delivery.push}}` …); it has run before them. */
  private deliveryOutcome(): RunDeliveryOutcome {
    const outputs = this.tracker.state.outputs ?? {};
    const push = this.tracker.state.stages.find((s) => s.id === DELIVERY_STAGE_ID);
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
    const { stages, costUsd, workspace } = this.tracker.state;
    return { stages: stages.map((s) => ({ id: s.id, status: s.status, costUsd: s.totals?.costUsd ?? 0 })), costUsd, workspace };
  }
}
