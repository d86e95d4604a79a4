import type { TokenUsage } from '../../../pipeline/stage-result.js';
import { fileWrittenBy } from '../../outputs/file-claims.js';
import type { AttemptProgress } from '../stage-backend.js';
import { AgentActivityTracker } from '../agent-activity.js';
import { computeCostUsd, resolveModelId, type ModelCatalog } from '../models.js';

/** The `result` line `claude -p --output-format stream-json` ends with (fields we use; key order varies). */
export interface CliResultEvent {
  type: 'result';
  subtype: string;
  is_error: boolean;
  /** `null` when the run stopped on its budget, even if the answer was complete. */
  result: string | null;
  session_id?: string;
  num_turns?: number;
  duration_ms?: number;
  total_cost_usd?: number;
  usage?: { input_tokens?: number; output_tokens?: number; cache_read_input_tokens?: number; cache_creation_input_tokens?: number };
  terminal_reason?: string;
  api_error_status?: number | null;
  api_error_type?: string | null;
  api_error?: string | null;
  errors?: string[] | null;
  /** Why the CLI did not start the session, e.g. `sandbox_required_unavailable` (with `sandbox.failIfUnavailable`). */
  startup_failure_reason?: string | null;
  permission_denials?: { tool_name: string; tool_use_id?: string; tool_input: unknown }[];
}

interface ApiUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
}

interface CliEvent {
  type?: string;
  subtype?: string;
  session_id?: string;
  /** `assistant`: a finished content block of a model message (one event per block). */
  message?: { id?: string; model?: string; usage?: ApiUsage; content?: { type: string; text?: string; name?: string; input?: unknown }[] };
  /** `stream_event` (with `--include-partial-messages`): the raw API stream event. */
  event?: { type?: string; message?: { id?: string; model?: string; usage?: ApiUsage }; usage?: ApiUsage };
  api_message_id?: string;
  mcp_servers?: { name: string; status: string }[];
  retry_delay_ms?: number;
  error_status?: number;
  original_model?: string;
  fallback_model?: string;
  trigger?: string;
}

/** Token counts of one model message, as its stream reports them. */
interface MessageUsage {
  modelId: string;
  input: number;
  cacheWrite: number;
  cacheRead: number;
  output: number;
}

/** Stream events that are the agent's own output (text, tool calls), as opposed to the CLI's bookkeeping. */
const OUTPUT_STREAM_EVENTS = new Set(['content_block_start', 'content_block_delta', 'content_block_stop']);

/**
 * Folds the CLI's stream-json events into what the activity needs: session id, turns, cost so far,
 * the tail of the last assistant text and the final result. Keeps one small record per model
 * message and nothing of the text but its last block, so memory stays flat however long the stream.
 */
export class CliEventReader {
  sessionId: string;
  result: CliResultEvent | undefined;
  /** Text of the last assistant text block (already bounded by the line splitter). */
  lastAssistantText = '';
  /** Wall-clock time of the last agent output. @unit milliseconds since the epoch */
  lastOutputAt: number;
  /** Whether the agent produced any output yet (text, tool call or tool result). */
  sawOutput = false;
  /** MCP servers the CLI reported as failed at start. */
  failedMcpServers: string[] = [];
  /** The CLI switched models (`--fallback-model`). */
  fallback: { from?: string; to?: string; trigger?: string } | undefined;
  /** The wait the CLI last announced before retrying a 429 itself (only with `CLAUDE_CODE_MAX_RETRIES` > 0). @unit milliseconds */
  rateLimitDelayMs: number | undefined;
  private readonly messages = new Map<string, MessageUsage>();
  /** The agent's latest text and tool call, for the heartbeats of a client following the stage. */
  private readonly activity = new AgentActivityTracker();

  constructor(
    sessionId: string,
    private readonly models: ModelCatalog,
    /** Told the file of each writing tool call (Write, Edit...) as the call arrives, before the tool runs. */
    private readonly onFileWrite: (file: string) => void = () => undefined,
  ) {
    this.sessionId = sessionId;
    this.lastOutputAt = Date.now();
  }

  /** Folds in one event; returns true when it was agent output (what stall detection follows). */
  read(value: unknown): boolean {
    if (typeof value !== 'object' || value === null) return false;
    const event = value as CliEvent;
    if (typeof event.session_id === 'string') this.sessionId = event.session_id;
    let output = false;
    switch (event.type) {
      case 'stream_event':
        output = this.readStreamEvent(event);
        break;
      case 'assistant':
        output = this.readAssistant(event);
        break;
      case 'user':
        output = true;
        break;
      case 'result':
        this.result = value as CliResultEvent;
        output = true;
        break;
      case 'system':
        this.readSystem(event);
        break;
    }
    if (output) {
      this.sawOutput = true;
      this.lastOutputAt = Date.now();
    }
    return output;
  }

  /** Model messages seen so far (the CLI's `num_turns` counts the same). */
  get turns(): number {
    return this.messages.size;
  }

  /** Tokens so far, summed over the model messages; cache reads and writes apart from the full-price input, as the API reports them. */
  get usage(): Required<TokenUsage> {
    const usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
    for (const m of this.messages.values()) {
      usage.inputTokens += m.input;
      usage.outputTokens += m.output;
      usage.cacheReadTokens += m.cacheRead;
      usage.cacheWriteTokens += m.cacheWrite;
    }
    return usage;
  }

  /** Cost so far from per-message usage (models without a price count 0); the result's total wins once known. @unit US dollars */
  get costUsd(): number {
    if (this.result?.total_cost_usd !== undefined) return this.result.total_cost_usd;
    let total = 0;
    for (const m of this.messages.values()) {
      const usage = { inputTokens: m.input, outputTokens: m.output, cacheReadTokens: m.cacheRead, cacheWriteTokens: m.cacheWrite };
      total += computeCostUsd(m.modelId, usage, this.models) ?? 0;
    }
    return total;
  }

  progress(): AttemptProgress {
    return {
      sessionId: this.sessionId,
      turns: this.result?.num_turns ?? this.turns,
      costUsd: this.costUsd,
      lastEventAt: this.lastOutputAt,
      usage: this.usage,
      ...(this.activity.activity ? { agent: this.activity.activity } : {}),
    };
  }

  private readStreamEvent(event: CliEvent): boolean {
    const inner = event.event;
    if (inner?.type === 'message_start' && inner.message?.id) {
      this.recordUsage(inner.message.id, inner.message.model, inner.message.usage);
    } else if (inner?.type === 'message_delta' && event.api_message_id) {
      // message_delta carries the final output count of the message (message_start only has 1).
      this.recordUsage(event.api_message_id, undefined, inner.usage);
    }
    return OUTPUT_STREAM_EVENTS.has(inner?.type ?? '');
  }

  private readAssistant(event: CliEvent): boolean {
    const message = event.message;
    // API errors come as synthetic assistant messages: not the agent's output, and free.
    if (!message || message.model === '<synthetic>') return false;
    if (message.id) this.recordUsage(message.id, message.model, message.usage);
    for (const block of message.content ?? []) {
      const file = block.type === 'tool_use' ? fileWrittenBy(block.name, block.input) : undefined;
      if (file) this.onFileWrite(file);
      if (block.type === 'tool_use' && block.name) this.activity.toolCall(block.name, block.input);
    }
    const text = (message.content ?? []).filter((b) => b.type === 'text').map((b) => b.text ?? '').join('');
    if (text) {
      this.lastAssistantText = text;
      this.activity.text(text);
    }
    return true;
  }

  private readSystem(event: CliEvent): void {
    if (event.subtype === 'init') {
      this.failedMcpServers = (event.mcp_servers ?? []).filter((s) => s.status === 'failed').map((s) => s.name);
    } else if (event.subtype === 'model_fallback') {
      this.fallback = { from: event.original_model, to: event.fallback_model, trigger: event.trigger };
    } else if (event.subtype === 'api_retry' && event.error_status === 429 && typeof event.retry_delay_ms === 'number') {
      this.rateLimitDelayMs = event.retry_delay_ms;
    }
  }

  /** Merges what an event says about a message's tokens: counts only grow as the stream goes on. */
  private recordUsage(id: string, model: string | undefined, usage: ApiUsage | undefined): void {
    const known = this.messages.get(id);
    const next: MessageUsage = known ?? { modelId: '', input: 0, cacheWrite: 0, cacheRead: 0, output: 0 };
    if (model) next.modelId = resolveModelId(model, this.models);
    next.input = Math.max(next.input, usage?.input_tokens ?? 0);
    next.cacheWrite = Math.max(next.cacheWrite, usage?.cache_creation_input_tokens ?? 0);
    next.cacheRead = Math.max(next.cacheRead, usage?.cache_read_input_tokens ?? 0);
    next.output = Math.max(next.output, usage?.output_tokens ?? 0);
    this.messages.set(id, next);
  }
}
