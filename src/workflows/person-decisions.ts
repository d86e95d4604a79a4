import { patched } from '@temporalio/workflow';
import { isCommandStage } from '../pipeline/command-stage.js';
import { toMilliseconds } from '../pipeline/duration.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { StageResult } from '../pipeline/stage-result.js';
import type { StageRunnerContext } from './stage-runner-context.js';
import { failed, rejected, type Done, type Round, type Step } from './stage-round.js';
import { commandsFor } from './waits.js';

/*
 * The waits of a round in which a person decides how a stage goes on: its approval gate, a question nobody answered in
 * time, and a failure with `onFailure: ask`. Each returns the round's next step.
 */

/**
 * Patch: a round's loops that a person (or nobody) keeps going are bounded: a question that times out with
 * `onTimeout: continue` again and again, and retries asked for after failures (`onFailure: ask`). Runs recorded
 * before it never went past the bounds, so their replays take the unpatched branch unchanged.
 */
const LOOP_BOUNDS_PATCH = 'bound-answer-and-retry-loops';
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
export const ANSWER_TIMEOUT_EFFECT: Record<NonNullable<AnswerWait['onTimeout']>, string> = {
  fail: 'the stage fails',
  skip: 'the stage is skipped',
  continue: 'the agent goes on without an answer',
};

/** The approval gate, if the stage has one, then the stage is completed. */
export async function approveAndComplete(ctx: StageRunnerContext, stage: ResolvedStage, result: StageResult | undefined): Promise<Done> {
  const { tracker } = ctx;
  if (stage.approval) {
    const gate = stage.approval === true ? {} : stage.approval;
    const message = gate.message ?? (result ? `stage ${stage.id} completed: ${result.summary}` : `stage ${stage.id} needs a person's approval`);
    const decision = await ctx.waits.waitFor(
      stage.id,
      {
        kind: 'approval',
        message,
        commands: commandsFor('approval', tracker.state.runId, stage.id),
        onTimeout: gate.timeout === undefined ? undefined : gate.onTimeout === 'approve' ? 'the stage is approved' : 'the stage fails',
      },
      { timeoutMs: gate.timeout === undefined ? undefined : toMilliseconds(gate.timeout) },
    );
    if (decision.kind === 'timeout' && gate.onTimeout === 'approve') tracker.warn(`stage ${stage.id} was approved when its approval timed out (${gate.timeout})`);
    else if (decision.kind === 'timeout') {
      return failed(ctx, stage, { type: 'APPROVAL_TIMED_OUT', message: `[APPROVAL_TIMED_OUT] nobody approved stage ${stage.id} within ${gate.timeout}` });
    } else if (decision.kind !== 'approve') return rejected(ctx, stage, decision);
  }
  tracker.markCompleted(stage.id, result);
  return { kind: 'done', outcome: { kind: 'completed' } };
}

/** Nobody answered the agent's question in time: fail, skip, or let the agent go on with a note (`answer.onTimeout`). */
export function whenUnanswered(ctx: StageRunnerContext, stage: ResolvedStage, round: Round, bound: AnswerWait, sessionId: string | undefined): Step {
  const { tracker } = ctx;
  const onTimeout = bound.onTimeout ?? 'fail';
  const what = `nobody answered the question of stage ${stage.id} within ${bound.timeout}`;
  if (onTimeout === 'skip') {
    tracker.markSkipped(stage.id, what, true);
    return { kind: 'done', outcome: { kind: 'skipped' } };
  }
  if (onTimeout === 'continue') {
    round.unanswered = (round.unanswered ?? 0) + 1;
    if (round.unanswered > MAX_UNANSWERED_QUESTIONS && patched(LOOP_BOUNDS_PATCH)) {
      return failed(ctx, stage, {
        type: 'ANSWER_TIMED_OUT',
        message: `[ANSWER_TIMED_OUT] ${what}, the ${round.unanswered}th question of this round nobody answered (at most ${MAX_UNANSWERED_QUESTIONS} may go unanswered with \`onTimeout: continue\`); make the step template tell the agent to decide on its own, or answer sooner`,
      });
    }
    tracker.warn(`${what}; the agent went on without an answer`);
    return { kind: 'again', continuation: { kind: 'answer', sessionId, message: bound.note ?? DEFAULT_UNANSWERED_NOTE } };
  }
  return failed(ctx, stage, { type: 'ANSWER_TIMED_OUT', message: `[ANSWER_TIMED_OUT] ${what}; answer sooner, or set the stage's \`answer.onTimeout\` to skip or continue` });
}

/** A failure for good: the run fails, unless `onFailure: ask` lets a person retry or skip the stage. */
export async function whenStageFailed(ctx: StageRunnerContext, stage: ResolvedStage, round: Round, failure: { type: string; message: string; sessionId?: string }): Promise<Step> {
  if (stage.onFailure !== 'ask') return failed(ctx, stage, failure);
  if ((round.retries ?? 0) >= MAX_PERSON_RETRIES && patched(LOOP_BOUNDS_PATCH)) {
    return failed(ctx, stage, { type: failure.type, message: `${failure.message} (after ${round.retries} retries a person asked for, the most one round allows; start a new run to try again)` });
  }
  // A command stage has no agent, so nothing would read a retry's feedback: it is neither offered nor taken.
  const noFeedback = isCommandStage(stage) ? 'runs a command (`run:`), with no agent' : undefined;
  const decision = await ctx.waits.waitFor(
    stage.id,
    { kind: 'failure', message: `stage ${stage.id} failed: ${failure.message}`, commands: commandsFor('failure', ctx.tracker.state.runId, stage.id, { feedback: !noFeedback }) },
    { noFeedback },
  );
  if (decision.kind === 'skip') {
    ctx.tracker.markSkipped(stage.id, 'a person skipped it after it failed', true);
    return { kind: 'done', outcome: { kind: 'skipped' } };
  }
  if (decision.kind !== 'retry') return rejected(ctx, stage, decision);
  round.retries = (round.retries ?? 0) + 1;
  const sessionId = failure.sessionId ?? ctx.sessions.get(stage.id);
  return { kind: 'again', continuation: decision.feedback ? { kind: 'retry', sessionId, message: decision.feedback } : undefined };
}
