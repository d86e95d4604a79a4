import { ApplicationFailure } from '@temporalio/workflow';
import type { RunState } from '../pipeline/run-state.js';
import { DECISION_NOT_TRUSTED } from '../contracts/trust-types.js';
import { agentPipelineCommand, shellWord } from '../pipeline/shell-words.js';
import { findToolNameProblem } from '../pipeline/tool-names.js';
import type { AnswerStageInput, ApproveStageInput, DenyStageInput, RejectStageInput, RetryStageInput, SkipStageInput } from '../contracts/messages.js';
import type { PipelineRun } from './pipeline-run.js';
import { rejectUpdate, type OpenWait } from './waits.js';

function requireText(value: unknown, what: string, flag: string): void {
  if (typeof value !== 'string' || value.trim() === '') throw rejectUpdate(`${what} is empty; give it as ${flag}`);
}

/**
 * The update handlers: validators say precisely why a decision does not apply (unknown stage, stage not
 * waiting, the wrong kind of decision); handlers record the decision and return the run's new state.
 * Every failure thrown here is an ApplicationFailure, so a bad request never fails the workflow task.
 * With signed decisions, validators refuse an unsigned decision first, and handlers have its signature checked before
 * anything changes (DECISION_NOT_TRUSTED: the stage goes on waiting).
 */
export class RunControls {
  constructor(private readonly run: PipelineRun) {}

  private get state(): RunState {
    return this.run.tracker.state;
  }

  validateAnswer(input: AnswerStageInput): void {
    this.run.trust.requireSignature(input.signature);
    requireText(input.text, 'the answer', 'answer RUN [--stage S] "TEXT"');
    this.requireSameRequest(input, this.answerTargets(input));
  }

  async answer(input: AnswerStageInput): Promise<RunState> {
    await this.run.trust.verify('answerStage', input);
    await this.run.waits.decide(this.answerTargets(input), { kind: 'answer', text: input.text });
    return this.state;
  }

  private answerTargets(input: AnswerStageInput): OpenWait[] {
    return this.run.waits.resolve('answer', input.stage, ['answer', 'question']);
  }

  validateApprove(input: ApproveStageInput): void {
    this.run.trust.requireSignature(input.signature);
    this.requireSameRequest(input, this.approveTargets(input));
  }

  async approve(input: ApproveStageInput): Promise<RunState> {
    await this.run.trust.verify('approveStage', input);
    const targets = this.approveTargets(input);
    if (input.budgetUsd !== undefined) this.run.budget.raise(input.budgetUsd);
    await this.run.waits.decide(targets, { kind: 'approve', input });
    return this.state;
  }

  private approveTargets(input: ApproveStageInput): OpenWait[] {
    const { waits } = this.run;
    if (input.budgetUsd !== undefined) {
      if (typeof input.budgetUsd !== 'number' || !(input.budgetUsd > this.state.costUsd)) {
        throw rejectUpdate(`--budget-usd ${input.budgetUsd} must be more than what the run has spent ($${this.state.costUsd.toFixed(4)})`);
      }
      return waits.resolve('approve --budget-usd', input.stage, ['budget']);
    }
    const targets = waits.resolve('approve', input.stage, ['approval', 'permission', 'review_rounds', 'budget', 'tool_request']);
    const { kind, stage } = targets[0];
    const stageOption = stage ? [`--stage ${shellWord(stage)}`] : [];
    if (kind === 'budget') {
      throw rejectUpdate(`the run is out of budget ($${this.state.costUsd.toFixed(4)} of $${(this.state.budgetUsd ?? 0).toFixed(2)}); raise it with ${agentPipelineCommand('approve', this.state.runId, ['--budget-usd N'])}`);
    }
    if (kind === 'permission' && !input.allowAll && !(input.allowTools && input.allowTools.length > 0)) {
      const tools = [...new Set((this.run.tracker.stage(stage).waitingFor?.denials ?? []).map((d) => d.tool))];
      throw rejectUpdate(`stage ${stage} had calls to ${tools.join(', ')} denied; say which tools to allow: ${agentPipelineCommand('approve', this.state.runId, [...stageOption, `--allow ${tools[0] === undefined ? 'TOOL' : shellWord(tools[0])}`])} (or --allow-all)`);
    }
    const badTool = (input.allowTools ?? []).map(findToolNameProblem).find(Boolean);
    if (badTool) throw rejectUpdate(`--allow: ${badTool}`);
    if (kind === 'tool_request' && input.allowTools?.length) {
      throw rejectUpdate(`stage ${stage}'s agent waits to run one call: approve it, or allow its tool for the rest of the stage with --allow-all`);
    }
    if ((input.allowAll || input.allowTools?.length) && kind !== 'permission' && kind !== 'tool_request') {
      throw rejectUpdate(`stage ${stage} waits for ${kind.replace('_', ' ')}, not for tool permissions; drop --allow/--allow-all`);
    }
    if (input.rounds !== undefined) {
      if (kind !== 'review_rounds') throw rejectUpdate(`stage ${stage} is not at its review-round cap; --rounds applies only then`);
      if (!Number.isInteger(input.rounds) || input.rounds < 1) throw rejectUpdate(`--rounds ${input.rounds} must be a whole number of at least 1`);
    }
    return targets;
  }

  validateReject(input: RejectStageInput): void {
    this.run.trust.requireSignature(input.signature);
    requireText(input.reason, 'the reason', 'reject RUN [--stage S] --reason "TEXT"');
    this.requireSameRequest(input, this.rejectTargets(input));
  }

  async reject(input: RejectStageInput): Promise<RunState> {
    await this.run.trust.verify('rejectStage', input);
    await this.run.waits.decide(this.rejectTargets(input), { kind: 'reject', reason: input.reason });
    return this.state;
  }

  private rejectTargets(input: RejectStageInput): OpenWait[] {
    return this.run.waits.resolve('reject', input.stage, ['approval', 'permission', 'review_rounds', 'budget', 'answer', 'tool_request', 'question']);
  }

  validateDeny(input: DenyStageInput): void {
    this.run.trust.requireSignature(input.signature);
    if (input.message !== undefined && typeof input.message !== 'string') throw rejectUpdate('--message must be text');
    this.requireSameRequest(input, this.denyTargets(input));
  }

  async deny(input: DenyStageInput): Promise<RunState> {
    await this.run.trust.verify('denyStage', input);
    await this.run.waits.decide(this.denyTargets(input), { kind: 'deny', message: input.message });
    return this.state;
  }

  private denyTargets(input: DenyStageInput): OpenWait[] {
    return this.run.waits.resolve('deny', input.stage, ['tool_request', 'question']);
  }

  /**
   * A decision on what an agent asks mid-turn decides the request it names, and no other: the wait may have moved on to
   * another request (the agent asked again, a retried attempt asked) since the person looked. With signed decisions
   * it must name one, so that its signature covers which request it decides.
   */
  private requireSameRequest(input: { request?: unknown }, targets: readonly OpenWait[]): void {
    const prompt = targets.find((t) => t.kind === 'tool_request' || t.kind === 'question');
    if (!prompt) return;
    const digest = this.run.tracker.stage(prompt.stage).waitingFor?.promptDigest;
    if (input.request === undefined) {
      if (digest && this.run.trust.decisionsSigned) {
        throw ApplicationFailure.create({
          type: DECISION_NOT_TRUSTED,
          message: `stage ${prompt.stage}'s agent waits on a request, and this run takes only signed decisions that name the request they decide; decide again with \`request: "${digest}"\` (the library and the CLI add it when they sign)`,
          nonRetryable: true,
        });
      }
      return;
    }
    if (input.request !== digest) {
      throw rejectUpdate(`the decision is for request ${String(input.request).slice(0, 12)}…, but stage ${prompt.stage}'s agent now waits on ${digest ? `request ${digest.slice(0, 12)}…` : 'a request without a digest'}; look at \`status\` and decide again`);
    }
  }

  validateRetry(input: RetryStageInput): void {
    this.run.trust.requireSignature(input.signature);
    this.retryTargets(input);
  }

  async retry(input: RetryStageInput): Promise<RunState> {
    await this.run.trust.verify('retryStage', input);
    await this.run.waits.decide(this.retryTargets(input), { kind: 'retry', feedback: input.feedback || undefined });
    return this.state;
  }

  /** The failed stage a retry is for; feedback only where an agent reads it (it was dropped unread before). */
  private retryTargets(input: RetryStageInput): OpenWait[] {
    const targets = this.run.waits.resolve('retry', input.stage, ['failure']);
    const deaf = input.feedback ? targets.find((wait) => wait.noFeedback) : undefined;
    if (deaf) {
      throw rejectUpdate(
        `stage ${deaf.stage} ${deaf.noFeedback} to read --feedback; retry it without: ${agentPipelineCommand('retry', this.state.runId, [`--stage ${shellWord(deaf.stage)}`])}`,
      );
    }
    return targets;
  }

  validateSkip(input: SkipStageInput): void {
    this.run.trust.requireSignature(input.signature);
    this.run.waits.resolve('skip', input.stage, ['failure']);
  }

  async skip(input: SkipStageInput): Promise<RunState> {
    await this.run.trust.verify('skipStage', input);
    await this.run.waits.decide(this.run.waits.resolve('skip', input.stage, ['failure']), { kind: 'skip' });
    return this.state;
  }
}
