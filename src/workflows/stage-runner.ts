import { isCancellation, patched } from '@temporalio/workflow';
import type { StageAttemptInput } from '../contracts/stage-attempt.js';
import { toMilliseconds } from '../pipeline/duration.js';
import { capArtifacts, MAX_LISTED_ARTIFACTS } from '../pipeline/output-caps.js';
import { mergeArtifacts } from '../pipeline/review-ledger.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { StageResult } from '../pipeline/stage-result.js';
import { attemptInput } from './attempt-input.js';
import { ANSWER_TIMEOUT_EFFECT, approveAndComplete, whenStageFailed, whenUnanswered } from './person-decisions.js';
import { readStageFailure, runStageActivity } from './stage-activity.js';
import { carryExecution, newExecution } from './stage-execution.js';
import { resolveMergeConflict } from './stage-merge.js';
import { failed, rejected, type Continuation, type Round, type RunEnd, type StageOutcome, type Step } from './stage-round.js';
import type { StageRunnerContext } from './stage-runner-context.js';
import { commandsFor } from './waits.js';

/**
 * Patch: the artifacts a round's calls reported together (an answer or a retry is another call) are capped like one
 * call's. Runs recorded before it never listed more than the cap, so their replays take the unpatched branch unchanged.
 */
const ARTIFACT_CAP_PATCH = 'cap-round-artifacts';
/**
 * Patch: `onPermissionDenied: fail` fails the stage when its agent's calls were denied (the schema took the value, but
 * the stage completed with a warning). Called only for such a stage with denials, so other histories carry no marker.
 */
const PERMISSION_DENIED_FAIL_PATCH = 'permission-denied-fail';

/**
 * Runs one round of one stage: attempts, and the waits for people between them (a question, denied tools, a
 * failure with `onFailure: ask`, the review cap, an approval gate). Marks the stage's final state in the tracker.
 */
export class StageRunner {
  /** How the run ended, once it has: `finally` stages read it as `{{run.status}}`, `{{run.error}}` and `{{run.delivery.…}}`. */
  runEnd?: RunEnd;

  constructor(private readonly ctx: StageRunnerContext) {}

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
      if (stage.gateOnly) return (await approveAndComplete(this.ctx, stage, undefined)).outcome;
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

  private async attempt(stage: ResolvedStage, round: Round, continuation: Continuation): Promise<Step> {
    const { tracker } = this.ctx;
    const startedAt = Date.now();
    // The attempt takes the stage's `limits:` keys before its agent starts (activities/leases/stage-leases.ts).
    const leases = this.ctx.limits?.stageKeys(stage);
    if (leases && !Array.isArray(leases)) return failed(this.ctx, stage, leases);
    let result: StageResult;
    try {
      result = await this.callStage(stage, attemptInput(this.ctx, stage, { round, continuation, runEnd: this.runEnd, leases }));
    } catch (err) {
      // A prompt of the attempt still open (its worker died while its agent waited) can no longer be answered.
      this.ctx.waits.closePrompt(stage.id);
      const failure = readStageFailure(err, stage);
      tracker.recordCost(stage.id, { ...failure, durationMs: Date.now() - startedAt });
      if (failure.sessionId) this.ctx.sessions.set(stage.id, failure.sessionId);
      // `status` shows where to look before a person decides on the failure, even when no stage has completed.
      tracker.state.workspace ??= failure.workspace;
      if (failure.cancelled) throw err;
      return whenStageFailed(this.ctx, stage, round, failure);
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
      if (decision.kind !== 'approve') return rejected(this.ctx, stage, decision);
      const allowed = decision.input.allowAll ? tools : (decision.input.allowTools ?? []);
      round.granted.push(...allowed);
      const message = `A person allowed ${allowed.join(', ')}. Make the calls that were denied again and finish the task.`;
      return { kind: 'again', continuation: { kind: 'permission', sessionId, message } };
    }
    if (denials.length > 0 && stage.onPermissionDenied === 'fail' && result.status !== 'needs_input' && patched(PERMISSION_DENIED_FAIL_PATCH)) {
      const tools = [...new Set(denials.map((d) => d.tool))].join(', ');
      const message = `[PERMISSION_DENIED] stage ${stage.id}: the agent's calls to ${tools} were denied; add them to allowedTools (or permissionMode), or set onPermissionDenied: ask to decide while the run waits`;
      return whenStageFailed(this.ctx, stage, round, { type: 'PERMISSION_DENIED', message, sessionId });
    }
    if (result.status === 'needs_input' && result.blocked && stage.onBlocked === 'fail' && this.knobs) {
      // A terminal outcome, not a wait: the run fails with the agent's reason (`onFailure: ask` does not apply).
      const reason = result.question ?? result.summary;
      return failed(this.ctx, stage, { type: 'AGENT_BLOCKED', message: `[AGENT_BLOCKED] stage ${stage.id}: the agent is blocked: ${reason}` });
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
        { timeoutMs: bound ? toMilliseconds(bound.timeout) : undefined },
      );
      if (decision.kind === 'timeout' && bound) return whenUnanswered(this.ctx, stage, round, bound, sessionId);
      if (decision.kind !== 'answer') return rejected(this.ctx, stage, decision);
      return { kind: 'again', continuation: { kind: 'answer', sessionId, message: decision.text } };
    }
    if (result.status === 'failed') {
      const message = `[AGENT_REPORTED_FAILURE] stage ${stage.id}: ${result.error ?? result.summary}`;
      return whenStageFailed(this.ctx, stage, round, { type: 'AGENT_REPORTED_FAILURE', message, sessionId });
    }
    if (result.mergeConflict) {
      const merge = await resolveMergeConflict(this.ctx, stage, result);
      if (merge.kind === 'skipped') {
        tracker.markSkipped(stage.id, "a person left the stage's work out after its merge conflicted", true);
        return { kind: 'done', outcome: { kind: 'skipped' } };
      }
      if (merge.kind === 'decided') return rejected(this.ctx, stage, merge.decision);
      result = merge.result;
      tracker.recordResult(stage.id, result);
    }
    if (stage.review) {
      const review = await this.ctx.reviews.judge(stage, result, round.number);
      if (review.kind === 'rework') return { kind: 'done', outcome: review };
      if (review.kind === 'failed') return failed(this.ctx, stage, review);
    }
    return approveAndComplete(this.ctx, stage, result);
  }
}
