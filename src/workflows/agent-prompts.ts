import { uuid4 } from '@temporalio/workflow';
import type { AgentPromptDecision, AgentPromptRequest } from '../pipeline/agent-prompt.js';
import { promptSettings } from '../pipeline/agent-prompt.js';
import { formatDuration } from '../pipeline/duration.js';
import type { WaitingFor } from '../pipeline/run-state.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { RunTracker } from './run-tracker.js';
import { requireKeyHolder } from './key-holders.js';
import { commandsFor, rejectUpdate, type Decision, type HumanWaits } from './waits.js';

/** What the agent reads when a person denies its call without a message. */
const DEFAULT_DENY_MESSAGE = 'A person denied this tool call. Do not try it again; go on without it.';

/**
 * Mid-turn prompts as waits of the run (docs/permission-prompts.md). The attempt's `agentPrompt` update lands here:
 * the stage waits like any other wait (shown by `status`, `watch`, `list --status waiting`), and the update returns the
 * person's decision, or the timeout's, to the attempt, whose agent process waits for it. Nothing here outlives the
 * attempt: a prompt exists only while its activity runs, and a run hands over (continue-as-new) only when no stage
 * runs, so there is nothing to carry.
 */
export class AgentPrompts {
  /** Tools a person allowed for the rest of a stage's round (`approve --allow-all` on a prompt). */
  private readonly allowed = new Map<string, Set<string>>();
  /** The token of each asking stage's latest scheduled attempt: only that attempt may ask. */
  private readonly tokens = new Map<string, string>();
  /** The ids of the asks each stage's latest attempt made: each is taken once. */
  private readonly asked = new Map<string, Set<string>>();

  constructor(
    private readonly tracker: RunTracker,
    private readonly waits: HumanWaits,
    private readonly stageOf: (id: string) => ResolvedStage | undefined,
    /** False for runs started before mid-turn prompts existed: their stages never ask. */
    private readonly enabled: boolean,
    /** False for runs started before prompts carried their attempt's token (PROMPT_TOKENS_PATCH): any ask is the attempt's. */
    private readonly usesTokens = false,
  ) {}

  /**
   * A fresh token for the attempt about to be scheduled for `stage` (its activity input carries it), or undefined
   * when the stage never asks. Made with the workflow's seeded uuid, so it replays the same.
   */
  tokenFor(stage: ResolvedStage): string | undefined {
    if (!this.enabled || !this.usesTokens || stage.onPermissionRequest !== 'ask') return undefined;
    const token = uuid4();
    this.tokens.set(stage.id, token);
    this.asked.set(stage.id, new Set());
    return token;
  }

  /**
   * Refuses an ask that cannot be a wait: one no key holder sent (encrypted deployments), one without the token of the
   * stage's scheduled attempt, an unknown stage, a stage that does not ask, a stage that is not running.
   */
  validate(request: AgentPromptRequest): void {
    requireKeyHolder(request, 'the agentPrompt update');
    if (!this.enabled) throw rejectUpdate('this run started before mid-turn permission prompts existed; its stages never ask');
    const stage = typeof request?.stage === 'string' ? this.stageOf(request.stage) : undefined;
    if (!stage) throw rejectUpdate(`unknown stage "${String(request?.stage)}"`);
    const token = this.tokens.get(stage.id);
    if (token !== undefined && request.token !== token) {
      throw rejectUpdate(`the agentPrompt update for stage "${stage.id}" does not come from the attempt the run scheduled (its token does not match); only that attempt may ask`);
    }
    // A copy of one of the attempt's own asks (read from history) would close the ask now waiting and take its place.
    if (request.askId !== undefined && (typeof request.askId !== 'string' || request.askId.length > 64)) throw rejectUpdate("a prompt's `askId` is a string of at most 64 characters");
    if (request.askId !== undefined && this.asked.get(stage.id)?.has(request.askId)) {
      throw rejectUpdate(`the agentPrompt update for stage "${stage.id}" repeats an ask its attempt already made (askId ${request.askId}); each is taken once`);
    }
    if (stage.onPermissionRequest !== 'ask') throw rejectUpdate(`stage "${stage.id}" does not set \`onPermissionRequest: ask\``);
    if (request.digest !== undefined && (typeof request.digest !== 'string' || !/^[0-9a-f]{64}$/.test(request.digest))) throw rejectUpdate('a prompt\'s `digest` is the hex SHA-256 of the request');
    const state = this.tracker.stage(stage.id);
    const asking = state.waitingFor?.kind === 'tool_request' || state.waitingFor?.kind === 'question';
    if (state.status !== 'running' && !(state.status === 'waiting' && asking)) {
      throw rejectUpdate(`stage "${stage.id}" is ${state.status}, so its agent cannot be waiting for a decision`);
    }
  }

  /** The stage waits until a person decides or the prompt's deadline passes; resolves to what the agent is told. */
  async ask(request: AgentPromptRequest): Promise<AgentPromptDecision> {
    const stage = this.stageOf(request.stage)!;
    if (request.askId !== undefined) this.asked.get(stage.id)?.add(request.askId);
    if (request.kind === 'tool' && this.allowed.get(stage.id)?.has(request.tool)) return { behavior: 'allow', allowAll: true };
    // A prompt still open belongs to an attempt that is gone (its worker died): this one takes its place.
    this.waits.closePrompt(stage.id);
    const settings = promptSettings(stage);
    const decision = await this.waits.waitFor(stage.id, this.waiting(stage, request), { timeoutMs: settings.timeoutMs });
    return this.toAgent(stage, request, decision);
  }

  /** The tools a person allowed for the rest of the stage; later attempts of the round get them in `allowedTools`. */
  allowedTools(stage: string): string[] {
    return [...(this.allowed.get(stage) ?? [])];
  }

  /** A new round of the stage starts from its own settings. */
  resetStage(stage: string): void {
    this.allowed.delete(stage);
  }

  private waiting(stage: ResolvedStage, request: AgentPromptRequest): Omit<WaitingFor, 'since' | 'timeoutAt'> {
    const runId = this.tracker.state.runId;
    const { onTimeout } = promptSettings(stage);
    if (request.kind === 'question') {
      const questions = request.questions ?? [];
      return {
        kind: 'question',
        message: `the agent of stage ${stage.id} asks a question and waits for the answer`,
        question: questions.map((q) => q.question).join(' / ') || request.input,
        questions,
        ...(request.digest ? { promptDigest: request.digest } : {}),
        commands: commandsFor('question', runId, stage.id),
        onTimeout: onTimeout === 'fail' ? 'the stage fails' : 'the agent goes on without an answer',
      };
    }
    return {
      kind: 'tool_request',
      message: `the agent of stage ${stage.id} waits for permission to run ${request.tool}`,
      request: { tool: request.tool, input: request.input, ...(request.reason ? { reason: request.reason } : {}) },
      ...(request.digest ? { promptDigest: request.digest } : {}),
      commands: commandsFor('tool_request', runId, stage.id),
      onTimeout: onTimeout === 'fail' ? 'the stage fails' : 'the call is denied and the agent goes on',
    };
  }

  private toAgent(stage: ResolvedStage, request: AgentPromptRequest, decision: Decision): AgentPromptDecision {
    switch (decision.kind) {
      case 'approve':
        if (decision.input.allowAll) {
          this.allowed.set(stage.id, new Set([...(this.allowed.get(stage.id) ?? []), request.tool]));
          return { behavior: 'allow', allowAll: true };
        }
        return { behavior: 'allow' };
      case 'answer':
        return { behavior: 'answer', text: decision.text };
      case 'deny':
        return { behavior: 'deny', message: decision.message?.trim() || DEFAULT_DENY_MESSAGE };
      case 'reject':
        return { behavior: 'fail', type: 'REJECTED', message: `a person rejected what its agent asked: ${decision.reason}` };
      case 'timeout':
        return this.timedOut(stage, request);
      default:
        return { behavior: 'deny', message: DEFAULT_DENY_MESSAGE };
    }
  }

  private timedOut(stage: ResolvedStage, request: AgentPromptRequest): AgentPromptDecision {
    const { timeoutMs, onTimeout } = promptSettings(stage);
    const what = request.kind === 'question' ? 'question' : `request to run ${request.tool}`;
    const within = formatDuration(timeoutMs);
    if (onTimeout === 'fail') {
      return { behavior: 'fail', type: 'PERMISSION_TIMED_OUT', message: `nobody decided the agent's ${what} within ${within}` };
    }
    this.tracker.warn(`nobody decided the agent's ${what} in stage ${stage.id} within ${within}; it was denied and the agent went on`);
    return { behavior: 'deny', message: `Nobody decided within ${within}, so this was not allowed. Go on without it, and say in your summary what you could not do.` };
  }
}
