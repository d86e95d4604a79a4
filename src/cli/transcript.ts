import { computeCostUsd, type ModelCatalog } from '../activities/backends/models.js';
import { formatDuration } from '../pipeline/duration.js';
import { formatUsd } from './output.js';
import { oneLine, summariseInput } from './run-view.js';

/** How long a tool result may be before it is shortened. @unit characters */
const RESULT_WIDTH = 160;

interface ContentBlock {
  type: string;
  text?: string;
  name?: string;
  input?: unknown;
  content?: string | { type: string; text?: string }[];
  is_error?: boolean;
}

interface TranscriptEvent {
  type?: string;
  subtype?: string;
  session_id?: string;
  model?: string;
  cwd?: string;
  backend?: string;
  message?: {
    id?: string;
    model?: string;
    content?: ContentBlock[] | string;
    stop_reason?: string | null;
    usage?: { input_tokens?: number; output_tokens?: number; cache_creation_input_tokens?: number; cache_read_input_tokens?: number };
  };
  // system/api_retry
  attempt?: number;
  max_retries?: number;
  error_status?: number;
  error?: string | { type?: string; message?: string };
  // system/model_fallback
  original_model?: string;
  fallback_model?: string;
  // result
  is_error?: boolean;
  result?: string | null;
  num_turns?: number;
  total_cost_usd?: number;
  duration_ms?: number;
  errors?: string[];
  // command (a command stage's output line)
  stream?: 'stdout' | 'stderr';
  text?: string;
}

/**
 * Turns the Claude Code CLI's stream-json transcript (one JSON event per line, as the claude-cli backend saves it in
 * `attempt-N.jsonl`) into readable lines: assistant text, each tool call with its input summarised, tool results
 * shortened, and a header per model turn with its tokens and cost; a command stage's output line by line. Holds only
 * the turn count between lines.
 */
export class TranscriptFormatter {
  private turn = 0;
  private readonly seenMessages = new Set<string>();

  constructor(private readonly models: ModelCatalog) {}

  format(line: string): string[] {
    if (line.trim() === '') return [];
    let event: TranscriptEvent;
    try {
      event = JSON.parse(line) as TranscriptEvent;
    } catch {
      return [line];
    }
    switch (event.type) {
      case 'system':
        return this.system(event);
      case 'assistant':
        return this.assistant(event);
      case 'user':
        return this.toolResults(event);
      case 'result':
        return this.result(event);
      case 'command':
        // A command stage's output, line by line (backends/command/command-process.ts).
        return [event.stream === 'stderr' ? `[stderr] ${event.text ?? ''}` : (event.text ?? '')];
      default:
        return [];
    }
  }

  private system(event: TranscriptEvent): string[] {
    switch (event.subtype) {
      case 'init':
        return [`── session ${event.session_id ?? '?'} · ${event.backend ?? 'claude-cli'} · model ${event.model ?? '?'}${event.cwd ? ` · cwd ${event.cwd}` : ''}`];
      case 'api_retry':
        return [`! API error ${event.error_status ?? ''} ${describeError(event.error)}; the CLI retries (${event.attempt}/${event.max_retries})`];
      case 'model_fallback':
        return [`! switched from ${event.original_model} to ${event.fallback_model}`];
      default:
        return [];
    }
  }

  private assistant(event: TranscriptEvent): string[] {
    const message = event.message ?? {};
    const lines: string[] = [];
    // The CLI emits one `assistant` event per content block of a message; the turn header comes once per message.
    if (!message.id || !this.seenMessages.has(message.id)) {
      if (message.id) this.seenMessages.add(message.id);
      this.turn += 1;
      lines.push(this.turnHeader(message));
    }
    const content = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : (message.content ?? []);
    for (const block of content) {
      if (block.type === 'text' && block.text?.trim()) lines.push(...block.text.trimEnd().split('\n').map((l) => `  ${l}`));
      else if (block.type === 'tool_use') lines.push(`  → ${block.name ?? 'tool'} ${summariseInput(block.input)}`);
      else if (block.type === 'thinking') lines.push('  (thinking)');
    }
    return lines;
  }

  private turnHeader(message: NonNullable<TranscriptEvent['message']>): string {
    const { usage, model } = message;
    if (!usage) return `[turn ${this.turn}]`;
    const input = (usage.input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0);
    // The CLI streams each message as it starts, with the usage of `message_start`: the output count is not known
    // yet (it says 1). The result line at the end has the true totals.
    const outputKnown = message.stop_reason != null || (usage.output_tokens ?? 0) > 1;
    const output = outputKnown ? (usage.output_tokens ?? 0) : 0;
    const tokenUsage = {
      inputTokens: usage.input_tokens ?? 0,
      outputTokens: output,
      cacheReadTokens: usage.cache_read_input_tokens ?? 0,
      cacheWriteTokens: usage.cache_creation_input_tokens ?? 0,
    };
    const cost = model ? computeCostUsd(this.models.aliases[model] ?? model, tokenUsage, this.models) : null;
    const tokens = outputKnown ? `${input} in / ${output} out tokens` : `${input} input tokens`;
    const price = cost === null ? '' : outputKnown ? ` · ${formatUsd(cost)}` : ` · input ${formatUsd(cost)}`;
    return `[turn ${this.turn} · ${tokens}${price}]`;
  }

  private toolResults(event: TranscriptEvent): string[] {
    const content = event.message?.content;
    if (!Array.isArray(content)) return [];
    return content
      .filter((block) => block.type === 'tool_result')
      .map((block) => {
        const text = typeof block.content === 'string' ? block.content : (block.content ?? []).map((c) => c.text ?? '').join(' ');
        return `  ← ${block.is_error ? 'error' : 'ok'}: ${oneLine(text, RESULT_WIDTH) || '(no output)'}`;
      });
  }

  private result(event: TranscriptEvent): string[] {
    const outcome = event.is_error ? `failed (${event.subtype})` : 'done';
    const facts = [
      `${event.num_turns ?? this.turn} turn${(event.num_turns ?? this.turn) === 1 ? "" : "s"}`,
      event.total_cost_usd !== undefined ? formatUsd(event.total_cost_usd) : '',
      event.duration_ms !== undefined ? formatDuration(event.duration_ms) : '',
    ].filter(Boolean);
    const lines = [`── ${outcome} · ${facts.join(' · ')}`];
    if (event.is_error) {
      lines.push(...(event.errors ?? []).map((e) => `  ${e}`));
      if (event.error) lines.push(`  ${describeError(event.error)}`);
      if (event.result) lines.push(`  ${oneLine(event.result, 300)}`);
    }
    return lines;
  }
}

function describeError(error: TranscriptEvent['error']): string {
  if (!error) return '';
  return typeof error === 'string' ? error : [error.type, error.message].filter(Boolean).join(': ');
}
