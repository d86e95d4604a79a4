import { CancellationScope, patched, sleep, workflowInfo } from '@temporalio/workflow';
import { toMilliseconds } from '../pipeline/duration.js';
import type { RunState } from '../pipeline/run-state.js';
import { resolveStage, type ResolvedStage } from '../pipeline/stage-options.js';
import { fillStageOptions, usesInputOptions } from '../pipeline/stage-option-inputs.js';
import { sandboxOptionOff } from '../pipeline/stage-tools.js';
import { BudgetGuard } from './budget.js';
import { RunDelivery } from './delivery.js';
import type { PipelineRunInput, TemplateValues, TemplateValuesRequest } from '../contracts/messages.js';
import { ReviewLoop } from './review-loop.js';
import { CARRY_OVER_VERSION, type RunCarryOver } from '../contracts/run-carry-over.js';
import { handOverLimits, readCarryOver, type HandOverLimits } from './run-carry-over.js';
import { RunLimits } from './run-limits.js';
import { RunTracker } from './run-tracker.js';
import { StageRunner } from './stage-runner.js';
import { StageScheduler } from './stage-scheduler.js';
import { RunFinisher } from './run-finisher.js';
import { AgentPrompts } from './agent-prompts.js';
import { answerTemplateValues, TEMPLATE_VALUES_PATCH } from './template-values.js';
import { BOUNDED_STAGES_PATCH, RunVisibility } from './visibility.js';
import { HumanWaits } from './waits.js';
import { RunTrust } from './run-trust.js';
import { RUN_OWNER_PATCH, RunOwner } from './run-owner.js';
import { takeOverFork } from './run-fork.js';
import { nameRunFolders } from './run-folders.js';
import type { RunForkRequest } from '../contracts/run-fork.js';

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
/**
 * Patch: in a run with a stage that asks to go unsandboxed (`sandbox: false`), every attempt carries the key that signed
 * the run, which a `permissive` worker with trusted keys requires for such a stage. Only runs with such a stage call
 * patched(), so other histories carry no marker; replays of earlier runs send no signer, and such a worker refuses the
 * stage (it fails closed).
 */
export const SANDBOX_SIGNER_PATCH = 'trust33-sandbox-signer';

/**
 * Patch (issue 33): each attempt of an asking stage gets a token in its activity input, and the run takes mid-turn
 * prompts only with it (agent-prompts.ts). Only runs with such a stage call patched(); runs started before take any ask.
 */
export const PROMPT_TOKENS_PATCH = 'trust33-prompt-tokens';
/** Stage options given as `{{inputs.NAME}}` (model, timeout, permissionMode, maxBudgetUsd) are filled per run (issue 31). */
export const STAGE_OPTION_INPUTS_PATCH = 'seed31-stage-options-from-inputs';

/** How `run()` ends when the run goes on in a fresh execution: the state to hand over. */
export interface HandOver {
  handOver: RunCarryOver;
}

/**
 * The conductor of one run: builds the run's state (fresh, or from what an earlier execution handed over), has the
 * {@link StageScheduler} start stages as soon as what they need is satisfied, bounds the whole run with the pipeline
 * `timeout`, hands over to a fresh execution once the history is long, and has the {@link RunFinisher} end the run.
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
  /** Starts the stage rounds, applies their outcomes and keeps the run's first failure. */
  private readonly scheduler: StageScheduler;
  private readonly finisher: RunFinisher;
  private readonly sessions: Map<string, string>;
  private readonly reviews: ReviewLoop;
  /** When the pipeline `timeout` ends the run; carried across executions. @unit milliseconds since the epoch */
  private readonly deadlineAt?: number;
  /** Executions of the run so far, this one included. */
  private readonly executions: number;
  private readonly limits: HandOverLimits;
  /** The worker that holds the run; absent in runs recorded before owners. */
  private readonly owner?: RunOwner;
  /** Set when a due hand-over found nothing left to run: the run ends in this execution. */
  private handOverDeclined = false;

  constructor(
    private readonly input: PipelineRunInput,
    runId: string,
  ) {
    // Every piece of state an earlier execution handed over is read here, and only here (see RunCarryOver).
    const carried = readCarryOver(input.carryOver);
    // Options given as `{{inputs.NAME}}` take the run's values (the input check refuses values they cannot take).
    // Only runs with such options call patched(); runs recorded before sent the text as written.
    const pipeline = usesInputOptions(input.pipeline) && patched(STAGE_OPTION_INPUTS_PATCH) ? fillStageOptions(input.pipeline, input.inputs).pipeline : input.pipeline;
    this.stages = pipeline.stages.map((s) => resolveStage(pipeline, s));
    this.finallyStages = (pipeline.finally ?? []).map((s) => resolveStage(pipeline, s, true));
    this.tracker = new RunTracker(runId, input.pipeline.name, input.inputs, [...this.stages, ...this.finallyStages], input.pipeline.budgetUsd, carried?.state);
    nameRunFolders(this.tracker.state, carried !== undefined);
    // Decided once, in the run's first task: a patch checked first inside an update handler or a later task would not
    // line up with its marker on replay. Runs recorded before the patches keep the old behaviour to their end.
    const byReference = patched(TEMPLATE_VALUES_PATCH);
    this.visibility = new RunVisibility(this.tracker, patched(BOUNDED_STAGES_PATCH));
    this.waits = new HumanWaits(this.tracker, this.publish);
    const all = [...this.stages, ...this.finallyStages];
    const asks = all.some((s) => s.onPermissionRequest === 'ask') && patched(MID_TURN_PROMPTS_PATCH);
    this.prompts = new AgentPrompts(this.tracker, this.waits, (id) => all.find((s) => s.id === id), asks, asks && patched(PROMPT_TOKENS_PATCH));
    this.budget = new BudgetGuard(this.tracker, this.waits, input.pipeline.onBudgetExceeded ?? 'ask');
    const sessions = (this.sessions = new Map(carried?.sessions));
    this.reviews = new ReviewLoop(this.stages, this.tracker, this.waits, (id) => sessions.get(id), carried?.reviews);
    const knobs = patched(STAGE_KNOBS_PATCH);
    const sendsSigner = all.some((s) => sandboxOptionOff(s.sandbox)) && patched(SANDBOX_SIGNER_PATCH);
    this.keys = new RunLimits(input, this.tracker, this.publish, carried?.leases);
    const owner = (this.owner = patched(RUN_OWNER_PATCH) ? new RunOwner(this.tracker, carried?.owner) : undefined);
    this.runner = new StageRunner({ input, tracker: this.tracker, waits: this.waits, budget: this.budget, reviews: this.reviews, sessions, stages: this.stages, publish: this.publish, byReference, knobs, limits: this.keys, prompts: this.prompts, signedBy: sendsSigner ? () => this.trust.signedBy() : undefined, owner });
    this.runner.runEnd = carried?.runEnd;
    const { tracker, runner, publish } = this;
    this.scheduler = new StageScheduler({ stages: this.stages, concurrency: input.pipeline.concurrency, tracker, runner, keys: this.keys, publish, carried });
    const delivery = new RunDelivery(input, tracker, this.waits, byReference, owner);
    this.finisher = new RunFinisher({ tracker, runner, delivery, scheduler: this.scheduler, finallyStages: this.finallyStages, publish });
    const timeout = input.pipeline.timeout;
    this.deadlineAt = carried ? carried.deadlineAt : timeout === undefined ? undefined : this.tracker.state.startedAt + toMilliseconds(timeout);
    this.executions = carried ? carried.executions + 1 : 1;
    this.limits = handOverLimits(input.pipeline.continueAsNew);
    this.trust = new RunTrust(carried?.trust);
  }

  /** A fork's first step: the source's stages it takes over (workflows/run-fork.ts). */
  async takeOverFork(fork: RunForkRequest): Promise<void> {
    await takeOverFork(fork, this.tracker, this.sessions, this.owner);
    this.publish();
  }

  /** The whole state of the run, for its next execution. Every field of RunCarryOver is filled here. */
  private carryOver(): RunCarryOver {
    return {
      version: CARRY_OVER_VERSION,
      state: this.tracker.state,
      rounds: this.scheduler.roundsToCarry(),
      sessions: [...this.sessions],
      reviews: this.reviews.snapshot(),
      failure: this.scheduler.failure,
      runEnd: this.runner.runEnd,
      deadlineAt: this.deadlineAt,
      executions: this.executions,
      trust: this.trust.snapshot(),
      leases: this.keys.heldKeys(),
      owner: this.owner?.snapshot(),
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
    const refused = await this.scheduler.scope.run(() => this.keys.acquire());
    if (refused) this.scheduler.fail(refused);
    for (;;) {
      // Once the history is long, no new stage starts: the rounds in flight (and their waits for people) finish,
      // then the run hands over to a fresh execution of itself.
      const handingOver = this.handOverDue();
      if (!handingOver && !this.scheduler.failure && !this.scheduler.scope.consideredCancelled) this.scheduler.startReadyStages();
      if (this.scheduler.running === 0) {
        if (!handingOver) break;
        if (this.scheduler.hasReadyStages()) {
          timer?.cancel();
          return { handOver: this.carryOver() };
        }
        this.handOverDeclined = true;
        continue;
      }
      await this.scheduler.nextSettled();
    }
    timer?.cancel();
    return await this.finisher.finish();
  }

  /**
   * Whether the run should continue as new: Temporal suggests it, or the history passed the pipeline's
   * `continueAsNew` limits. Read from the activation, so a replay decides the same. Never while the run is ending.
   * Behind the patch: a run recorded before hand-overs existed kept starting stages past these limits, and its
   * replay must too (the patch is false until the replay reaches new ground, where it records its marker).
   */
  private handOverDue(): boolean {
    const { scheduler } = this;
    if (this.handOverDeclined || scheduler.settledHere === 0 || scheduler.failure || scheduler.scope.consideredCancelled) return false;
    const info = workflowInfo();
    const long = info.continueAsNewSuggested || info.historyLength >= this.limits.afterEvents || (info.historySize ?? 0) >= this.limits.afterBytes;
    return long && patched(CONTINUE_AS_NEW_PATCH);
  }

  /** Starts the pipeline `timeout`: when it ends first, the run fails with PIPELINE_TIMEOUT (its stages are stopped). */
  private startTimeout(): CancellationScope | undefined {
    const timeout = this.input.pipeline.timeout;
    if (timeout === undefined) return undefined;
    const scope = new CancellationScope();
    const message = `[PIPELINE_TIMEOUT] the run did not finish within its timeout (${timeout}); raise the pipeline's \`timeout\` if it needs longer`;
    // A continued run sleeps what is left of the deadline its first execution set.
    const ms = this.executions === 1 || this.deadlineAt === undefined ? toMilliseconds(timeout) : Math.max(1, this.deadlineAt - Date.now());
    void scope.run(() => sleep(ms, { summary: `pipeline timeout ${timeout}` })).then(
      () => this.scheduler.fail({ type: 'PIPELINE_TIMEOUT', message }),
      () => undefined, // cancelled: the run ended first
    );
    return scope;
  }
}
