import { currentRedaction } from '../secrets.js';

/*
 * What an agent is doing right now, for a client following its stage (`run.events()`, `watch`): its latest text and
 * its latest tool call with the input summarised. It travels in the attempt's heartbeat details, which Temporal keeps
 * with the pending activity (read through describe) and never writes to history beat by beat; so it is small (a few
 * hundred characters whatever the agent does) and redacted of the worker's secrets before it leaves the worker.
 */

/** Kept of the agent's latest text: its end, where the newest words are. @unit characters */
export const AGENT_TEXT_MAX_CHARS = 400;
/** Kept of a tool call's input summary. @unit characters */
export const TOOL_INPUT_MAX_CHARS = 200;
/** Longest tool name kept (MCP tools have long names). @unit characters */
const TOOL_NAME_MAX_CHARS = 100;

/** The agent's latest doings, as its heartbeats carry them. */
export interface AgentActivity {
  /** The end of the agent's latest text (at most {@link AGENT_TEXT_MAX_CHARS} characters). */
  text?: string;
  /** The agent's latest tool call: the tool's name and its input summarised (at most {@link TOOL_INPUT_MAX_CHARS} characters). */
  tool?: { name: string; input: string };
  /** Tool calls the agent made in this attempt so far. */
  toolCalls: number;
}

/** The input field that says what a call of a well-known tool does; other tools show their input as compact JSON. */
const TOOL_SUBJECT: Record<string, string> = {
  Bash: 'command',
  Read: 'file_path',
  Write: 'file_path',
  Edit: 'file_path',
  MultiEdit: 'file_path',
  NotebookEdit: 'notebook_path',
  Glob: 'pattern',
  Grep: 'pattern',
  WebFetch: 'url',
  WebSearch: 'query',
  Task: 'description',
};

/** A tool call's input in a line: the field that says what it does (`npm test`, `src/a.ts`), else compact JSON; cut to a bound. */
export function summarizeToolInput(name: string, input: unknown): string {
  const field = TOOL_SUBJECT[name];
  const subject = field && typeof input === 'object' && input !== null ? (input as Record<string, unknown>)[field] : undefined;
  let text: string;
  try {
    text = typeof subject === 'string' ? subject : (JSON.stringify(input) ?? '');
  } catch {
    text = '';
  }
  return cut(text.replace(/\s+/g, ' ').trim(), TOOL_INPUT_MAX_CHARS);
}

/** Follows an agent's output and keeps its latest text and tool call, bounded and redacted, for its heartbeats. */
export class AgentActivityTracker {
  // The redaction of the activity that made the tracker: the agent's output is read in callbacks of its stream.
  private readonly redact = currentRedaction();
  private latest: AgentActivity = { toolCalls: 0 };

  /** The agent wrote text. */
  text(text: string): void {
    // Redacted whole, then cut: a secret is never split at the cut and half of it kept.
    const redacted = this.redact(text).trim();
    if (redacted) this.latest = { ...this.latest, text: redacted.length > AGENT_TEXT_MAX_CHARS ? `…${redacted.slice(-AGENT_TEXT_MAX_CHARS + 1)}` : redacted };
  }

  /** The agent called a tool. */
  toolCall(name: string, input: unknown): void {
    const tool = { name: cut(name, TOOL_NAME_MAX_CHARS), input: summarizeToolInput(name, this.redact(input)) };
    this.latest = { ...this.latest, tool, toolCalls: this.latest.toolCalls + 1 };
  }

  /** What the agent did last; undefined before it did anything. */
  get activity(): AgentActivity | undefined {
    return this.latest.text === undefined && this.latest.tool === undefined ? undefined : this.latest;
  }
}

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
