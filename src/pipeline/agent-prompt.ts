import { toMilliseconds } from './duration.js';
import type { Duration } from './schema.js';

/*
 * Mid-turn prompts (docs/permission-prompts.md): the Claude Code CLI asks its host before a tool call that the stage's
 * `allowedTools` and permission mode do not settle, and before the agent's own question (AskUserQuestion). With
 * `onPermissionRequest: ask` the attempt hands each ask to the workflow, where it is a wait of the run, and answers the
 * waiting agent with the person's decision: the same process continues its turn. Pure: shared by the activity, the
 * workflow and the library.
 */

/** The wait of a prompt when the stage sets no `permissionRequest.timeout`. */
export const DEFAULT_PROMPT_TIMEOUT = '10m';

/** Longest summary of a tool call's input that a wait shows. @unit characters */
export const PROMPT_INPUT_CAP = 2_000;
/** Most questions, and options per question, a wait shows (AskUserQuestion asks 1 to 4, with 2 to 4 options). */
export const PROMPT_LIST_CAP = 8;

/** One question the agent asks mid-turn, with the answers it suggests. */
export interface AgentQuestion {
  question: string;
  /** Short label of the question (`header`), when the agent gave one. */
  header?: string;
  /** The suggested answers; a person may still answer anything. */
  options: string[];
  multiSelect?: boolean;
}

/** What the attempt asks the workflow: one tool call needing permission, or the agent's question. */
export interface AgentPromptRequest {
  stage: string;
  /** The activity attempt that asks; a later attempt's ask replaces an earlier one's still open (a crashed worker). */
  attempt: number;
  /** `tool`: permission for a tool call; `question`: the agent asks a person (AskUserQuestion). */
  kind: 'tool' | 'question';
  /** The tool the agent called, e.g. `Bash`. */
  tool: string;
  /** The call's input, summarised (`summariseToolInput`). */
  input: string;
  /** Why the CLI asks, in its own words (its `decision_reason`), or the path it would touch (`blocked_path`). */
  reason?: string;
  questions?: AgentQuestion[];
  /**
   * The attempt's own token, from its activity input (`StageAttemptInput.promptToken`): the run takes a prompt only
   * from the attempt it scheduled, not from any client of the namespace. Absent for attempts scheduled before tokens.
   */
  token?: string;
  /**
   * A fresh id of this ask, made by the attempt: the run takes each once, so a copy of an earlier ask of the attempt
   * (its encrypted payload read from history and sent again) cannot take a later ask's place. Absent from workers of
   * earlier releases.
   */
  askId?: string;
  /**
   * SHA-256 (hex) of the request as people see it (`kind`, `tool`, `input`, `questions`; see trust/prompt-digest.ts),
   * which the wait shows: a decision that names it decides this request and no other.
   */
  digest?: string;
}

/** The workflow's answer to a prompt, which the attempt turns into the CLI's `control_response`. */
export type AgentPromptDecision =
  /** Run the call; `allowAll`: and every later call to this tool in the stage. */
  | { behavior: 'allow'; allowAll?: boolean }
  /** Do not run it; the agent reads `message` as the tool's result and goes on. */
  | { behavior: 'deny'; message: string }
  /** The answer to the agent's question. */
  | { behavior: 'answer'; text: string }
  /** End the attempt: the stage fails with this failure (`onTimeout: fail`, or a person's `reject`); `message` names no stage. */
  | { behavior: 'fail'; type: 'PERMISSION_TIMED_OUT' | 'REJECTED'; message: string };

/** The stage settings of its prompts, with their defaults. */
export interface PromptSettings {
  timeoutMs: number;
  onTimeout: 'deny' | 'fail';
}

export function promptSettings(stage: { permissionRequest?: { timeout?: Duration; onTimeout?: 'deny' | 'fail' } }): PromptSettings {
  return { timeoutMs: toMilliseconds(stage.permissionRequest?.timeout ?? DEFAULT_PROMPT_TIMEOUT), onTimeout: stage.permissionRequest?.onTimeout ?? 'deny' };
}

/**
 * A tool call's input in a line a person can judge: Bash's command, a file tool's path, else the JSON, capped. The
 * input is the agent's, untrusted: it is only ever shown, never run or parsed further.
 */
export function summariseToolInput(tool: string, input: unknown): string {
  const fields = input !== null && typeof input === 'object' ? (input as Record<string, unknown>) : {};
  const first = ['command', 'file_path', 'path', 'url', 'pattern'].map((k) => fields[k]).find((v) => typeof v === 'string');
  const text = typeof first === 'string' ? first : safeJson(input);
  return text.length > PROMPT_INPUT_CAP ? `${text.slice(0, PROMPT_INPUT_CAP)}… (${text.length} characters)` : text;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** The questions of an AskUserQuestion input, bounded; empty for anything else. */
export function readQuestions(input: unknown): AgentQuestion[] {
  const list = (input as { questions?: unknown } | null)?.questions;
  if (!Array.isArray(list)) return [];
  return list.slice(0, PROMPT_LIST_CAP).flatMap((q: unknown) => {
    const item = (q ?? {}) as { question?: unknown; header?: unknown; options?: unknown; multiSelect?: unknown };
    if (typeof item.question !== 'string') return [];
    const options = Array.isArray(item.options) ? item.options.slice(0, PROMPT_LIST_CAP).map((o: unknown) => (o as { label?: unknown } | null)?.label).filter((l): l is string => typeof l === 'string') : [];
    return [{ question: cap(item.question), ...(typeof item.header === 'string' ? { header: cap(item.header) } : {}), options: options.map(cap), ...(item.multiSelect === true ? { multiSelect: true } : {}) }];
  });
}

const cap = (text: string): string => (text.length > PROMPT_INPUT_CAP ? `${text.slice(0, PROMPT_INPUT_CAP)}…` : text);
