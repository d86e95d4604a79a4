import { CancellationScope } from '@temporalio/workflow';
import { ConditionSyntaxError, evaluateCondition, parseCondition } from '../pipeline/condition.js';
import { findBlockedDependents, findReadyStages, needIds } from '../pipeline/graph.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { RunCarryOver } from '../contracts/run-carry-over.js';
import type { RunLimits } from './run-limits.js';
import type { RunTracker } from './run-tracker.js';
import type { StageOutcome } from './stage-round.js';
import type { StageRunner } from './stage-runner.js';

/** A failure that ends the run: its type from the failure catalogue (or `PIPELINE_TIMEOUT` …) and its message. */
export interface RunFailure {
  type: string;
  message: string;
}

/** What the {@link StageScheduler} works with; owned by the PipelineRun. */
export interface StageSchedulerOptions {
  /** The pipeline's stages (not its `finally:` stages, which run once the run has ended). */
  stages: ResolvedStage[];
  /** Stage rounds in flight at once (the pipeline's `concurrency`). @default unbounded */
  concurrency?: number;
  tracker: RunTracker;
  runner: StageRunner;
  /** Told when a stage's round ends, so the stage's `limits:` keys are given back. */
  keys: RunLimits;
  publish(): void;
  /** What an earlier execution of the run handed over: the rounds to run next and its failure. */
  carried?: Pick<RunCarryOver, 'rounds' | 'failure'>;
}

/**
 * Starts stage rounds as soon as what they need is satisfied (up to `concurrency` at once; a stage waiting for a
 * person keeps its slot), skips stages whose `when:` is false, applies how each round ended (rework sends reviewed
 * stages back, a failure fails fast unless the stage has `continueOnFailure`), and keeps the run's first failure.
 */
export class StageScheduler {
  // Stages run in their own scope so that a failure or the timeout can stop them without cancelling the run.
  readonly scope = new CancellationScope();
  private readonly inFlight = new Map<string, Promise<void>>();
  /** The review round each reworked stage runs next (absent: round 1). */
  private readonly rounds: Map<string, number>;
  private firstFailure?: RunFailure;
  private settled = 0;
  /** The pipeline's stages by id: a search of the list for each ready stage grew with the run. */
  private readonly byId: ReadonlyMap<string, ResolvedStage>;
  /** Each stage's place in the pipeline, and the stages that need it. */
  private readonly order: ReadonlyMap<string, number>;
  private readonly dependents: ReadonlyMap<string, string[]>;
  /** Whether the ready stages were found once by looking at every stage; later only where something changed. */
  private scanned = false;
  /** Stages found ready that the `concurrency` limit held back: they are looked at again next time. */
  private heldBack = new Set<string>();

  constructor(private readonly options: StageSchedulerOptions) {
    this.rounds = new Map(options.carried?.rounds);
    this.firstFailure = options.carried?.failure;
    this.byId = new Map(options.stages.map((s) => [s.id, s]));
    this.order = new Map(options.stages.map((s, i) => [s.id, i]));
    const dependents = new Map<string, string[]>();
    for (const stage of options.stages) for (const need of new Set(needIds(stage))) dependents.set(need, [...(dependents.get(need) ?? []), stage.id]);
    this.dependents = dependents;
  }

  /**
   * The stages ready to start, in pipeline order. Looking at every stage each time made every activation grow with the
   * run; a stage becomes ready only when its own status or that of a stage it needs changed, so after the first look
   * only those are looked at (and those the `concurrency` limit held back), which finds the same stages.
   */
  private readyStages(): string[] {
    const { stages, tracker } = this.options;
    const changed = tracker.takeChanged();
    if (!this.scanned) {
      this.scanned = true;
      return findReadyStages(stages, tracker.isStarted, tracker.isSatisfied);
    }
    const ids = new Set(this.heldBack);
    for (const id of changed) {
      if (this.byId.has(id)) ids.add(id);
      for (const dependent of this.dependents.get(id) ?? []) ids.add(dependent);
    }
    const candidates = [...ids].sort((a, b) => this.order.get(a)! - this.order.get(b)!).map((id) => this.byId.get(id)!);
    return findReadyStages(candidates, tracker.isStarted, tracker.isSatisfied);
  }

  private stageById(id: string): ResolvedStage {
    return this.byId.get(id)!;
  }

  /** The run's first failure (a stage's, the timeout, a refused key, the delivery): it decides how the run ends. */
  get failure(): RunFailure | undefined {
    return this.firstFailure;
  }

  /** Stage rounds that ended in this execution: a run hands over only after some progress, so it never loops. */
  get settledHere(): number {
    return this.settled;
  }

  /** Stage rounds in flight (a round waiting for a person included). */
  get running(): number {
    return this.inFlight.size;
  }

  /** Settles when the first of the rounds in flight has ended and its outcome was applied. */
  nextSettled(): Promise<void> {
    return Promise.race(this.inFlight.values());
  }

  /** The round each reworked stage runs next, for the run's next execution. */
  roundsToCarry(): [stage: string, round: number][] {
    return [...this.rounds];
  }

  hasReadyStages(): boolean {
    return findReadyStages(this.options.stages, this.options.tracker.isStarted, this.options.tracker.isSatisfied).length > 0;
  }

  startReadyStages(): void {
    const { tracker } = this.options;
    const limit = this.options.concurrency ?? Number.POSITIVE_INFINITY;
    for (let changed = true; changed; ) {
      changed = false;
      const ready = this.readyStages();
      this.heldBack = new Set();
      for (const id of ready) {
        if (this.firstFailure) break;
        const stage = this.stageById(id);
        const holds = stage.when === undefined || this.conditionHolds(stage, stage.when);
        if (holds === 'invalid') break;
        if (!holds) {
          // Dependents still run: a stage skipped by its condition is a decision, not a failure.
          tracker.markSkipped(id, `condition \`${stage.when}\` is false`, true);
          changed = true;
        } else if (this.inFlight.size < limit) {
          this.launch(stage);
        } else {
          this.heldBack.add(id);
        }
      }
    }
    this.options.publish();
  }

  /** Fail fast: remember the first failure and stop every running or waiting stage. */
  fail(failure: RunFailure): void {
    this.firstFailure ??= { type: failure.type, message: failure.message };
    this.scope.cancel();
  }

  /** Remembers a failure found once every stage has ended (the delivery's), unless the run had failed already. */
  keepFailure(failure: RunFailure): void {
    this.firstFailure ??= failure;
  }

  /** `when:` was checked when the file was loaded; a run started around that check fails the stage, not the worker. */
  private conditionHolds(stage: ResolvedStage, when: string): boolean | 'invalid' {
    try {
      return evaluateCondition(parseCondition(when), this.options.tracker.conditionContext());
    } catch (err) {
      if (!(err instanceof ConditionSyntaxError)) throw err;
      const message = `[CONDITION_INVALID] stage ${stage.id}: invalid \`when\`: ${err.message}`;
      this.options.tracker.markFailed(stage.id, { type: 'CONDITION_INVALID', message });
      this.fail({ type: 'CONDITION_INVALID', message });
      return 'invalid';
    }
  }

  private launch(stage: ResolvedStage): void {
    const round = this.rounds.get(stage.id) ?? 1;
    const done = this.scope
      .run(() => this.options.runner.runRound(stage, round))
      .then((outcome) => this.settle(stage, outcome))
      .finally(() => {
        this.settled++;
        this.inFlight.delete(stage.id);
        this.options.keys.stageEnded(stage.id);
        this.options.publish();
      });
    this.inFlight.set(stage.id, done);
  }

  private settle(stage: ResolvedStage, outcome: StageOutcome): void {
    const { tracker } = this.options;
    switch (outcome.kind) {
      case 'rework':
        for (const id of outcome.stages) {
          this.rounds.set(id, (this.rounds.get(id) ?? 1) + 1);
          tracker.markPendingAgain(id);
        }
        return;
      case 'failed':
        if (!stage.continueOnFailure) return this.fail(outcome);
        // Stages that allow this failure (`needs: [{stage, allowFailure: true}]`) still run.
        for (const id of findBlockedDependents(this.options.stages, stage.id)) {
          if (tracker.stage(id).status === 'pending') tracker.markSkipped(id, `it needs ${stage.id}, which failed`, false);
        }
        tracker.warn(`stage ${stage.id} failed and the run went on (continueOnFailure): ${outcome.message}`);
        return;
      case 'stop':
        return this.fail(outcome);
      default:
        return;
    }
  }
}
