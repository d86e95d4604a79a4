import type { AttemptProgress } from './backend.js';

/** The `result` line `claude -p --output-format stream-json` ends with (fields we use). */
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
  usage?: { input_tokens?: number; output_tokens?: number };
  terminal_reason?: string;
  api_error_status?: number | null;
  api_error?: string;
  errors?: string[];
  permission_denials?: { tool_name: string; tool_use_id: string; tool_input: unknown }[];
}

interface ContentBlock {
  type: string;
  text?: string;
}

/**
 * Folds the CLI's stream-json lines into what the activity needs: session id, turns, the last
 * assistant text and the final result. Holds no history, so memory stays flat however long the stream.
 */
export class CliEventReader {
  sessionId: string;
  turns = 0;
  lastAssistantText = '';
  result: CliResultEvent | undefined;
  sawEvents = false;
  private lastEventAt = Date.now();

  constructor(sessionId: string) {
    this.sessionId = sessionId;
  }

  /** Reads one stdout line; returns true when it was agent progress worth a heartbeat. */
  read(line: string): boolean {
    let event: { type?: string; session_id?: string; message?: { content?: ContentBlock[] } };
    try {
      event = JSON.parse(line);
    } catch {
      return false;
    }
    this.sawEvents = true;
    this.lastEventAt = Date.now();
    if (typeof event.session_id === 'string') this.sessionId = event.session_id;
    if (event.type === 'assistant') {
      this.turns += 1;
      const text = (event.message?.content ?? []).filter((b) => b.type === 'text').map((b) => b.text ?? '').join('');
      if (text) this.lastAssistantText = text;
    } else if (event.type === 'result') {
      this.result = event as CliResultEvent;
    }
    return true;
  }

  progress(): AttemptProgress {
    return {
      sessionId: this.sessionId,
      turns: this.result?.num_turns ?? this.turns,
      costUsd: this.result?.total_cost_usd ?? 0,
      lastEventAt: this.lastEventAt,
    };
  }
}
