import { isCancellation, patched } from '@temporalio/workflow';
import type { StageAttemptInput } from '../contracts/stage-attempt.js';
import { toMilliseconds } from '../pipeline/duration.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import { needIds } from '../pipeline/graph.js';
import { stagesReadyAfter } from '../pipeline/next-stages.js';
import { capArtifacts, MAX_LISTED_ARTIFACTS } from '../pipeline/output-caps.js';
import { mergeArtifacts } from '../pipeline/review-ledger.js';
import type { ArtifactRef, StageResult } from '../pipeline/stage-result.js';
import type { RunDeliveryOutcome } from '../pipeline/template.js';
import { readStageFailure, runStageActivity } from './stage-activity.js';
import { resolveMergeConflict } from './stage-merge.js';
import { carryExecution, newExecution } from './stage-execution.js';
import type { StageRunnerContext } from './stage-runner-context.js';
import { inlineTemplateValues, prewarmHints } from './template-values.js';
import { objectInputNames } from '../pipeline/object-inputs.js';
import { commandsFor } from './waits.js';

type Continuation = StageAttemptInput['continuation'];

/**
 * Patch: the artifacts a round's calls reported together (an answer or a retry is another call) are capped like one
 * call's. Runs recorded before it never listed more than the cap, so their replays take the unpatched branch unchanged.
 */
const ARTIFACT_CAP_PATCH = 'cap-round-artifacts';
/**
 * Patch: a round's loops that a person (or nobody) keeps going are bounded: a question that times out with
 * `onTimeout: continue` again and again, and retries asked for after failures (`onFailure: ask`). Runs recorded
 * before it never went past the bounds, so their replays take the unpatched branch unchanged.
 */
const LOOP_BOUNDS_PATCH = 'bound-answer-and-retry-loops';
/**
 * Patch: `onPermissionDenied: fail` fails the stage when its agent's calls were denied (the schema took the value, but
 * the stage completed with a warning). Called only for such a stage with denials, so other histories carry no marker.
 */
const PERMISSION_DENIED_FAIL_PATCH = 'permission-denied-fail';
/** Questions in one round that may time out with `onTimeout: continue` before the stage fails `ANSWER_TIMED_OUT`. */
export const MAX_UNANSWERED_QUESTIONS = 10;
/** Retries a person may ask for in one round (`onFailure: ask`) before the next failure is the stage's last. */
export const MAX_PERSON_RETRIES = 20;
type AnswerWait = NonNullable<ResolvedStage['answer']>;

/** What the agent is told when its question timed out with `onTimeout: continue` and no `note`. */
const DEFAULT_UNANSWERED_NOTE =
  'Nobody answered your question in time. Go on without the answer: make the most reasonable assumption, say in your ' +
  'summary which assumption you made, and finish the task.';

/** How `status` says what a question's timeout will do. */
const ANSWER_TIMEOUT_EFFECT: Record<NonNullable<AnswerWait['onTimeout']>, string> = {
  fail: 'the stage fails',
  skip: 'the stage is skipped',
  continue: 'the agent goes on without an answer',
};

/** How one round of a stage ended. */
export type StageOutcome =
  | { kind: 'completed' | 'skipped' | 'cancelled' }
  | { kind: 'rework'; stages: string[] }
  /** The stage failed for good; the run fails unless the stage has `continueOnFailure`. */
  | { kind: 'failed'; type: string; message: string }
  /** The run must end whatever the stage's settings (the budget is spent). */
  | { kind: 'stop'; type: string; message: string };

/** After an attempt: run the stage again (with a continuation), or the round is over. */
type Done = { kind: 'done'; outcome: StageOutcome };

/** What one round of a stage carries across its activity calls (an answer, granted tools or a retry is another call). */
interface Round {
  number: number;
  /** Tools a person allowed after they were denied. */
  granted: string[];
  /** Every file the round's calls wrote; each call reports only its own. */
  artifacts: ArtifactRef[];
  /** Questions that timed out with `onTimeout: continue` so far. */
  unanswered?: number;
  /** Retries a person asked for after failures so far. */
  retries?: number;
}
type Step = { kind: 'again'; continuation: Continuation } | Done;

/**
 * Runs one round of one stage: attempts, and the waits for people between them (a question, denied tools, a
 * failure with `onFailure: ask`, the review cap, an approval gate). Marks the stage's final state in the tracker.
 */
export class StageRunner {
  /** How the run ended, once it has: `finally` stages read it as `{{run.status}}`, `{{run.error}}` and `{{run.delivery.…}}`. */
  runEnd?: { status: string; error: string; errorType?: string; delivery?: RunDeliveryOutcome };

  constructor(private readonly ctx: StageRunnerContext) {}

  /** The token of the attempt about to be scheduled, when its stage asks mid-turn (see AgentPrompts.tokenFor). */
  private promptToken(stage: ResolvedStage): { promptToken?: string } {
    const promptToken = this.ctx.prompts?.tokenFor(stage);
    return promptToken === undefined ? {} : { promptToken };
  }

  /** Whether the run has the stage knobs of `STAGE_KNOBS_PATCH` (decided once, at the run's first task). */
  get knobs(): boolean {
    return this.ctx.knobs === true;
  }

  async runRound(stage: ResolvedStage, round: number): Promise<StageOutcome> {
    const { tracker } = this.ctx;
    tracker.markRunning(stage.id, round);
    this.ctx.publish();
    let continuation = this.ctx.reviews.takeContinuation(stage, round);
    const current: Round = { number: round, granted: [], artifacts: [] };
    this.ctx.prompts?.resetStage(stage.id);
    try {
      // A gate-only stage runs no agent: it is only a person's approval.
      if (stage.gateOnly) return (await this.complete(stage, undefined)).outcome;
      for (;;) {
        // A spent budget does not hold back `finally` stages (a tracker update, a notification): the run has
        // ended and they are its bookkeeping; their own `maxBudgetUsd` still caps them.
        const stop = stage.isFinally ? undefined : await this.ctx.budget.gate(stage.id);
        if (stop) {
          tracker.markFailed(stage.id, stop);
          return { kind: 'stop', ...stop };
        }
        const step = await this.attempt(stage, current, continuation);
        if (step.kind === 'done') return step.outcome;
        continuation = step.continuation;
      }
    } catch (err) {
      if (!isCancellation(err)) throw err;
      tracker.markCancelled(stage.id, { type: 'CANCELLED', message: `stage ${stage.id} was stopped because the run is ending` });
      return { kind: 'cancelled' };
    }
  }

  /**
   * The run's signer, in a run with a stage that asks to go unsandboxed (the worker honours that only in signed runs):
   * every attempt carries it, so that an attempt starting the next stages' agents ahead of time decides as they will.
   */
  private signer(): Pick<StageAttemptInput, 'signedBy'> {
    const signedBy = this.ctx.signedBy?.();
    return signedBy === undefined ? {} : { signedBy };
  }

  private async attempt(stage: ResolvedStage, round: Round, continuation: Continuation): Promise<Step> {
    const { tracker, input } = this.ctx;
    const startedAt = Date.now();
    // Runs recorded before the patch sent every stage's results and all inputs to every stage (history grew with the
    // square of the stages); now only the stages it needs, the rest by reference (see template-values.ts).
    const byReference = this.ctx.byReference === true;
    const ended = stage.isFinally === true;
    const values = byReference ? inlineTemplateValues(tracker, input.inputs, needIds(stage), ended) : { inputs: input.inputs, priorStages: tracker.templateStages(ended) };
    const prewarm = this.ctx.stages && !stage.isFinally ? stagesReadyAfter(this.ctx.stages, stage.id, tracker.isStarted, tracker.isSatisfied) : undefined;
    // The attempt takes the stage's `limits:` keys before its agent starts (activities/leases/stage-leases.ts).
    const leases = this.ctx.limits?.stageKeys(stage);
    if (leases && !Array.isArray(leases)) return this.failed(stage, leases);
    let result: StageResult;
    try {
      result = await this.callStage(stage, {
        runId: tracker.state.runId,
        pipelineName: input.pipeline.name,
        baseDir: input.baseDir,
        // Only the hash: the activity reads the files from the run's start event, so history holds them once.
        bundleHash: input.bundle?.hash,
        stage: this.withGranted(stage, round),
        ...values,
        pipeline: {
          context: input.pipeline.context,
          systemPrompt: input.pipeline.systemPrompt,
          mcpServers: input.pipeline.mcpServers,
          workspace: input.pipeline.workspace,
          isolation: input.pipeline.isolation,
          promptsDir: input.pipeline.promptsDir,
        },
        round: round.number,
        ...(stage.isFinally && this.runEnd ? { runEnd: this.runEnd } : {}),
        continuation,
        reworkHistory: this.ctx.reviews.reworkHistory(stage.id),
        budgetRemainingUsd: stage.isFinally ? undefined : this.ctx.budget.remainingUsd(),
        prewarm: byReference ? prewarmHints(stage, prewarm) : prewarm,
        ...objectInputsOf(input.pipeline.inputs),
        ...(leases ? { leases } : {}),
        ...this.signer(),
        ...this.promptToken(stage),
      });
    } catch (err) {
      // A prompt of the attempt still open (its worker died while its agent waited) can no longer be answered.
      this.ctx.waits.closePrompt(stage.id);
      const failure = readStageFailure(err, stage);
      tracker.recordCost(stage.id, { ...failure, durationMs: Date.now() - startedAt });
      if (failure.sessionId) this.ctx.sessions.set(stage.id, failure.sessionId);
      if (failure.cancelled) throw err;
      return this.onFailure(stage, round, failure);
    }
    this.ctx.waits.closePrompt(stage.id);
    tracker.recordCost(stage.id, { usage: result.usage, costUsd: result.costUsd, attempts: result.attempt, durationMs: Date.now() - startedAt });
    round.artifacts = mergeArtifacts(round.artifacts, result.artifacts);
    if (round.artifacts.length > MAX_LISTED_ARTIFACTS && patched(ARTIFACT_CAP_PATCH)) {
      const byPath = [...round.artifacts].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
      const capped = capArtifacts(byPath, MAX_LISTED_ARTIFACTS, result.artifactsOmitted);
      round.artifacts = capped.listed;
      result = { ...result, artifactsOmitted: capped.omitted };
    }
    result = { ...result, artifacts: round.artifacts };
    tracker.recordResult(stage.id, result);
    if (result.sessionId) this.ctx.sessions.set(stage.id, result.sessionId);
    return this.onResult(stage, round, result);
  }

  /**
   * The stage's activity: on the shared queue in runs recorded before owners, else on the run's owner, as one stage
   * execution whose attempts, session, cost and last failure a move to another worker carries on.
   */
  private callStage(stage: ResolvedStage, input: StageAttemptInput): Promise<StageResult> {
    const { owner } = this.ctx;
    if (!owner) return runStageActivity(input, this.knobs);
    let execution = newExecution();
    return owner.run(
      `stage ${stage.id}`,
      (claim) => runStageActivity({ ...input, execution }, this.knobs, claim),
      (err) => {
        execution = carryExecution(execution, err, stage);
      },
    );
  }

  /** The stage with the tools people allowed in this round: after denials, and mid-turn with `approve --allow-all`. */
  private withGranted(stage: ResolvedStage, round: Round): ResolvedStage {
    const granted = [...round.granted, ...(this.ctx.prompts?.allowedTools(stage.id) ?? [])];
    return granted.length > 0 ? { ...stage, allowedTools: [...new Set([...(stage.allowedTools ?? []), ...granted])] } : stage;
  }

  private async onResult(stage: ResolvedStage, round: Round, result: StageResult): Promise<Step> {
    const { tracker, waits } = this.ctx;
    const runId = tracker.state.runId;
    const sessionId = result.sessionId;
    // A stage that asks mid-turn had each of its calls decided by a person (or the deadline) already: not asked again.
    const denials = stage.onPermissionRequest === 'ask' ? [] : (result.permissionDenials ?? []);
    if (denials.length > 0 && stage.onPermissionDenied === 'ask' && result.status !== 'needs_input') {
      const tools = [...new Set(denials.map((d) => d.tool))];
      const decision = await waits.waitFor(stage.id, {
        kind: 'permission',
        message: `the agent's calls to ${tools.join(', ')} were denied; allow them to resume the session, or reject`,
        denials,
        commands: commandsFor('permission', runId, stage.id, { tools }),
      });
      if (decision.kind !== 'approve') return this.rejected(stage, decision);
      const allowed = decision.input.allowAll ? tools : (decision.input.allowTools ?? []);
      round.granted.push(...allowed);
      const message = `A person allowed ${allowed.join(', ')}. Make the calls that were denied again and finish the task.`;
      return { kind: 'again', continuation: { kind: 'permission', sessionId, message } };
    }
    if (denials.length > 0 && stage.onPermissionDenied === 'fail' && result.status !== 'needs_input' && patched(PERMISSION_DENIED_FAIL_PATCH)) {
      const tools = [...new Set(denials.map((d) => d.tool))].join(', ');
      const message = `[PERMISSION_DENIED] stage ${stage.id}: the agent's calls to ${tools} were denied; add them to allowedTools (or permissionMode), or set onPermissionDenied: ask to decide while the run waits`;
      return this.onFailure(stage, round, { type: 'PERMISSION_DENIED', message, sessionId });
    }
    if (result.status === 'needs_input' && result.blocked && stage.onBlocked === 'fail' && this.knobs) {
      // A terminal outcome, not a wait: the run fails with the agent's reason (`onFailure: ask` does not apply).
      const reason = result.question ?? result.summary;
      return this.failed(stage, { type: 'AGENT_BLOCKED', message: `[AGENT_BLOCKED] stage ${stage.id}: the agent is blocked: ${reason}` });
    }
    if (result.status === 'needs_input') {
      const bound = stage.answer;
      const decision = await waits.waitFor(
        stage.id,
        {
          kind: 'answer',
          message: `stage ${stage.id} asks a question`,
          question: result.question ?? result.summary,
          commands: commandsFor('answer', runId, stage.id),
          onTimeout: bound ? ANSWER_TIMEOUT_EFFECT[bound.onTimeout ?? 'fail'] : undefined,
        },
        bound ? toMilliseconds(bound.timeout) : undefined,
      );
      if (decision.kind === 'timeout' && bound) return this.unanswered(stage, round, bound, sessionId);
      if (decision.kind !== 'answer') return this.rejected(stage, decision);
      return { kind: 'again', continuation: { kind: 'answer', sessionId, message: decision.text } };
    }
    if (result.status === 'failed') {
      const message = `[AGENT_REPORTED_FAILURE] stage ${stage.id}: ${result.error ?? result.summary}`;
      return this.onFailure(stage, round, { type: 'AGENT_REPORTED_FAILURE', message, sessionId });
    }
    if (result.mergeConflict) {
      const merge = await resolveMergeConflict(this.ctx, stage, result);
      if (merge.kind === 'skipped') {
        tracker.markSkipped(stage.id, "a person left the stage's work out after its merge conflicted", true);
        return { kind: 'done', outcome: { kind: 'skipped' } };
      }
      if (merge.kind === 'decided') return this.rejected(stage, merge.decision);
      result = merge.result;
      tracker.recordResult(stage.id, result);
    }
    if (stage.review) {
      const review = await this.ctx.reviews.judge(stage, result, round.number);
      if (review.kind === 'rework') return { kind: 'done', outcome: review };
      if (review.kind === 'failed') return this.failed(stage, review);
    }
    return this.complete(stage, result);
  }

  /** The approval gate, if the stage has one, then the stage is completed. */
  private async complete(stage: ResolvedStage, result: StageResult | undefined): Promise<Done> {
    const { tracker } = this.ctx;
    if (stage.approval) {
      const gate = stage.approval === true ? {} : stage.approval;
      const message = gate.message ?? (result ? `stage ${stage.id} completed: ${result.summary}` : `stage ${stage.id} needs a person's approval`);
      const decision = await this.ctx.waits.waitFor(
        stage.id,
        {
          kind: 'approval',
          message,
          commands: commandsFor('approval', tracker.state.runId, stage.id),
          onTimeout: gate.timeout === undefined ? undefined : gate.onTimeout === 'approve' ? 'the stage is approved' : 'the stage fails',
        },
        gate.timeout === undefined ? undefined : toMilliseconds(gate.timeout),
      );
      if (decision.kind === 'timeout' && gate.onTimeout === 'approve') tracker.warn(`stage ${stage.id} was approved when its approval timed out (${gate.timeout})`);
      else if (decision.kind === 'timeout') {
        return this.failed(stage, { type: 'APPROVAL_TIMED_OUT', message: `[APPROVAL_TIMED_OUT] nobody approved stage ${stage.id} within ${gate.timeout}` });
      } else if (decision.kind !== 'approve') return this.rejected(stage, decision);
    }
    tracker.markCompleted(stage.id, result);
    return { kind: 'done', outcome: { kind: 'completed' } };
  }

  /** Nobody answered the agent's question in time: fail, skip, or let the agent go on with a note (`answer.onTimeout`). */
  private unanswered(stage: ResolvedStage, round: Round, bound: AnswerWait, sessionId: string | undefined): Step {
    const { tracker } = this.ctx;
    const onTimeout = bound.onTimeout ?? 'fail';
    const what = `nobody answered the question of stage ${stage.id} within ${bound.timeout}`;
    if (onTimeout === 'skip') {
      tracker.markSkipped(stage.id, what, true);
      return { kind: 'done', outcome: { kind: 'skipped' } };
    }
    if (onTimeout === 'continue') {
      round.unanswered = (round.unanswered ?? 0) + 1;
      if (round.unanswered > MAX_UNANSWERED_QUESTIONS && patched(LOOP_BOUNDS_PATCH)) {
        return this.failed(stage, {
          type: 'ANSWER_TIMED_OUT',
          message: `[ANSWER_TIMED_OUT] ${what}, the ${round.unanswered}th question of this round nobody answered (at most ${MAX_UNANSWERED_QUESTIONS} may go unanswered with \`onTimeout: continue\`); make the step template tell the agent to decide on its own, or answer sooner`,
        });
      }
      tracker.warn(`${what}; the agent went on without an answer`);
      return { kind: 'again', continuation: { kind: 'answer', sessionId, message: bound.note ?? DEFAULT_UNANSWERED_NOTE } };
    }
    return this.failed(stage, { type: 'ANSWER_TIMED_OUT', message: `[ANSWER_TIMED_OUT] ${what}; answer sooner, or set the stage's \`answer.onTimeout\` to skip or continue` });
  }

  /** A failure for good: the run fails, unless `onFailure: ask` lets a person retry or skip the stage. */
  private async onFailure(stage: ResolvedStage, round: Round, failure: { type: string; message: string; sessionId?: string }): Promise<Step> {
    if (stage.onFailure !== 'ask') return this.failed(stage, failure);
    if ((round.retries ?? 0) >= MAX_PERSON_RETRIES && patched(LOOP_BOUNDS_PATCH)) {
      return this.failed(stage, { type: failure.type, message: `${failure.message} (after ${round.retries} retries a person asked for, the most one round allows; start a new run to try again)` });
    }
    const decision = await this.ctx.waits.waitFor(stage.id, {
      kind: 'failure',
      message: `stage ${stage.id} failed: ${failure.message}`,
      commands: commandsFor('failure', this.ctx.tracker.state.runId, stage.id),
    });
    if (decision.kind === 'skip') {
      this.ctx.tracker.markSkipped(stage.id, 'a person skipped it after it failed', true);
      return { kind: 'done', outcome: { kind: 'skipped' } };
    }
    if (decision.kind !== 'retry') return this.rejected(stage, decision);
    round.retries = (round.retries ?? 0) + 1;
    const sessionId = failure.sessionId ?? this.ctx.sessions.get(stage.id);
    return { kind: 'again', continuation: decision.feedback ? { kind: 'retry', sessionId, message: decision.feedback } : undefined };
  }

  private rejected(stage: ResolvedStage, decision: { kind: string; reason?: string }): Done {
    const reason = decision.reason ?? decision.kind;
    return this.failed(stage, { type: 'REJECTED', message: `[REJECTED] a person rejected stage ${stage.id}: ${reason}` });
  }

  private failed(stage: ResolvedStage, error: { type: string; message: string }): Done {
    this.ctx.tracker.markFailed(stage.id, { type: error.type, message: error.message });
    return { kind: 'done', outcome: { kind: 'failed', type: error.type, message: error.message } };
  }
}

/** `objectInputs` for the activity input when the pipeline declares inputs `type: object`; nothing otherwise. */
function objectInputsOf(inputs: Record<string, { type?: string }> | undefined): { objectInputs?: string[] } {
  const names = objectInputNames(inputs);
  return names.length > 0 ? { objectInputs: names } : {};
}
