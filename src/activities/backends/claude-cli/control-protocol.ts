import { readQuestions, summariseToolInput, type AgentPromptDecision, type AgentPromptRequest } from '../../../pipeline/agent-prompt.js';

/*
 * The host side of the CLI's control protocol, as far as a stage needs it (docs/permission-prompts.md): started with
 * `--permission-prompt-tool stdio` and `--input-format stream-json`, the CLI writes a `control_request` line with
 * subtype `can_use_tool` on stdout before a tool call that its rules and mode do not settle (AskUserQuestion included),
 * waits, and reads our `control_response` line on stdin.
 */

/** What the attempt asks of a person; the stage and attempt are added by the activity. */
export type PromptAsk = Omit<AgentPromptRequest, 'stage' | 'attempt'>;

/** Asks a person (through the workflow) and resolves to their decision. */
export type AskPerson = (ask: PromptAsk) => Promise<AgentPromptDecision>;

/** The tool through which the agent asks its own questions. */
export const QUESTION_TOOL = 'AskUserQuestion';

/** A `control_request` line of the CLI. */
export interface ControlRequest {
  type: 'control_request';
  request_id: string;
  request: { subtype: string; tool_name?: string; input?: Record<string, unknown>; decision_reason?: string; blocked_path?: string; [key: string]: unknown };
}

export function isControlRequest(event: unknown): event is ControlRequest {
  const e = event as Partial<ControlRequest> | null | undefined;
  return e?.type === 'control_request' && typeof e.request_id === 'string' && typeof e.request === 'object' && e.request !== null;
}

/** The line that answers `request_id` with `response` (a success). */
export function controlResponseLine(requestId: string, response: Record<string, unknown>): string {
  return `${JSON.stringify({ type: 'control_response', response: { subtype: 'success', request_id: requestId, response } })}\n`;
}

/** The line that refuses a control request this host does not serve. */
export function controlErrorLine(requestId: string, error: string): string {
  return `${JSON.stringify({ type: 'control_response', response: { subtype: 'error', request_id: requestId, error } })}\n`;
}

/** What to do with one `can_use_tool` request: the line to write back, and a failure when the attempt must end. */
export interface PromptOutcome {
  line: string;
  fail?: { type: 'PERMISSION_TIMED_OUT' | 'REJECTED'; message: string };
}

/**
 * Answers the CLI's permission requests of one attempt, one at a time (parallel tool calls ask together; a person
 * decides them in turn), remembering the tools a person allowed for the rest of the stage.
 */
export class PromptBridge {
  private queue: Promise<unknown> = Promise.resolve();
  private readonly allowed = new Set<string>();
  /** Set once a decision ended the attempt: the rest of its requests are denied at once. */
  failure?: PromptOutcome['fail'];

  constructor(private readonly ask: AskPerson) {}

  /** The reply to one control request, once decided; requests are decided in the order they came. */
  answer(request: ControlRequest): Promise<PromptOutcome> {
    const next = this.queue.then(() => this.decide(request));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async decide(control: ControlRequest): Promise<PromptOutcome> {
    const { request_id: id, request } = control;
    if (request.subtype !== 'can_use_tool') return { line: controlErrorLine(id, `this host does not serve ${String(request.subtype)} requests`) };
    const tool = typeof request.tool_name === 'string' ? request.tool_name : 'unknown';
    const input = request.input ?? {};
    if (this.failure) return { line: controlResponseLine(id, { behavior: 'deny', message: 'The stage is ending.', interrupt: true }) };
    if (this.allowed.has(tool) && tool !== QUESTION_TOOL) return { line: controlResponseLine(id, { behavior: 'allow', updatedInput: input }) };
    const question = tool === QUESTION_TOOL;
    const reason = typeof request.decision_reason === 'string' ? request.decision_reason : typeof request.blocked_path === 'string' ? `would touch ${request.blocked_path}` : undefined;
    const decision = await this.ask({
      kind: question ? 'question' : 'tool',
      tool,
      input: summariseToolInput(tool, input),
      ...(reason ? { reason: summariseToolInput('', reason) } : {}),
      ...(question ? { questions: readQuestions(input) } : {}),
    });
    return this.reply(id, tool, input, decision);
  }

  private reply(id: string, tool: string, input: Record<string, unknown>, decision: AgentPromptDecision): PromptOutcome {
    switch (decision.behavior) {
      case 'allow':
        if (decision.allowAll) this.allowed.add(tool);
        return { line: controlResponseLine(id, { behavior: 'allow', updatedInput: input }) };
      case 'answer':
        return { line: controlResponseLine(id, { behavior: 'allow', updatedInput: { ...input, answers: answersFor(input, decision.text) } }) };
      case 'deny':
        return { line: controlResponseLine(id, { behavior: 'deny', message: decision.message }) };
      case 'fail':
        this.failure = { type: decision.type, message: decision.message };
        return { line: controlResponseLine(id, { behavior: 'deny', message: decision.message, interrupt: true }), fail: this.failure };
    }
  }
}

/** AskUserQuestion's `answers`: the person's text for each question it asked, keyed by the question. */
function answersFor(input: Record<string, unknown>, text: string): Record<string, string> {
  // Keyed by each question exactly as the agent wrote it (not the capped text a person was shown).
  const list = Array.isArray(input.questions) ? (input.questions as unknown[]) : [];
  const questions = list.map((q) => (q as { question?: unknown } | null)?.question).filter((q): q is string => typeof q === 'string');
  const keys = questions.length > 0 ? questions : ['answer'];
  return Object.fromEntries(keys.map((key) => [key, text]));
}
