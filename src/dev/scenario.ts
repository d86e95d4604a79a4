import { readFile } from 'node:fs/promises';
import { isMap, isSeq, LineCounter, parseDocument, type Node as YamlNode } from 'yaml';
import { z } from 'zod';

/*
 * The scenario file of the scripted model server: which canned replies to give to which request.
 * docs/testing.md carries the user-facing reference (the scenario file); keep the two in step.
 */

const nonNegativeMs = z.int().min(0);

/** An API error the server answers with instead of a message. */
export const apiErrorSpecSchema = z.strictObject({
  /** HTTP status, e.g. 529, 429, 500, 401. */
  status: z.int().min(400).max(599),
  /** The `error.type` in the body, e.g. `overloaded_error`. @default derived from the status */
  type: z.string().min(1).optional(),
  /** The `error.message` in the body. @default a message naming the status */
  message: z.string().optional(),
  /** Sent as the `retry-after` header. @unit seconds */
  retryAfter: z.number().min(0).optional(),
  /** `false` sends `x-should-retry: false`, which stops the CLI's and the SDK's own retries. */
  shouldRetry: z.boolean().optional(),
});

/** One tool call in a scripted turn. */
export const toolCallSchema = z.strictObject({
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()).default({}),
  /** @default a fresh unique `toolu_…` id */
  id: z.string().min(1).optional(),
});

const usageSchema = z.strictObject({
  input_tokens: z.int().min(0).optional(),
  output_tokens: z.int().min(0).optional(),
  cache_creation_input_tokens: z.int().min(0).optional(),
  cache_read_input_tokens: z.int().min(0).optional(),
});

/** One scripted assistant reply. */
export const turnSchema = z
  .strictObject({
    /** Text block sent before any tool_use block. */
    text: z.string().optional(),
    /** Send `text` this many times in a row, streamed without building the whole string. */
    repeat: z.int().min(1).optional(),
    tool: toolCallSchema.optional(),
    tools: z.array(toolCallSchema).min(1).optional(),
    /** @default `tool_use` when the turn has a tool call, else `end_turn` */
    stopReason: z.enum(['end_turn', 'max_tokens', 'tool_use', 'stop_sequence', 'pause_turn', 'refusal']).optional(),
    /** Reported token counts. @default input 100, output about a quarter of the characters sent */
    usage: usageSchema.optional(),
    /** Answer every request for this turn with this error (a permanent failure). */
    error: apiErrorSpecSchema.optional(),
    /** The first N requests for this turn get these errors, in order; later ones get the reply. */
    failFirst: z.array(apiErrorSpecSchema).optional(),
    /** Wait before sending the response headers. @unit milliseconds */
    delayMs: nonNegativeMs.optional(),
    /** Wait between streamed text chunks. @unit milliseconds */
    chunkDelayMs: nonNegativeMs.optional(),
    /** Split the text into this many `text_delta` events. @default 1, or one per 64 KiB with `repeat` */
    chunks: z.int().min(1).optional(),
    /** After `message_start`, send nothing for this long (to trigger stall detection). @unit milliseconds */
    stallMs: nonNegativeMs.optional(),
  })
  .check((ctx) => {
    const turn = ctx.value;
    if (turn.repeat !== undefined && turn.text === undefined) {
      ctx.issues.push({ code: 'custom', input: turn.repeat, path: ['repeat'], message: '`repeat` needs a `text` to repeat' });
    }
    if (turn.tool !== undefined && turn.tools !== undefined) {
      ctx.issues.push({ code: 'custom', input: turn.tool, path: ['tool'], message: 'use either `tool` or `tools`, not both' });
    }
    if (turn.text === undefined && turn.tool === undefined && turn.tools === undefined && turn.error === undefined) {
      ctx.issues.push({ code: 'custom', input: turn, path: [], message: 'a turn needs `text`, `tool`, `tools` or `error`' });
    }
  });

const regexMatchSchema = z.strictObject({ regex: z.string().min(1), flags: z.string().optional() });

/** A rule: requests whose first user message matches are served its turns. */
export const ruleSchema = z.strictObject({
  /** Shown in the request log and in errors. @default `rule[i] "<match>"` */
  name: z.string().min(1).optional(),
  /** A substring of the first user message's text, or `{ regex, flags? }`. */
  match: z.union([z.string().min(1), regexMatchSchema], {
    error: 'expected a non-empty string or { regex: "...", flags?: "..." }',
  }),
  turns: z.array(turnSchema).min(1),
  /** Past the last scripted turn, keep serving the last one instead of failing. @default false */
  repeatLastTurn: z.boolean().default(false),
})
  .check((ctx) => {
    const { match } = ctx.value;
    if (typeof match === 'string') return;
    try {
      new RegExp(match.regex, match.flags);
    } catch (error) {
      const message = `invalid regular expression: ${(error as Error).message}`;
      ctx.issues.push({ code: 'custom', input: match.regex, path: ['match', 'regex'], message });
    }
  });

/** A whole scenario file. */
export const scenarioSchema = z.strictObject({
  rules: z.array(ruleSchema).default([]),
  /** What a request no rule matches gets: `error` (a loud 500) or a turn. @default 'error' */
  fallback: z.union([z.literal('error'), turnSchema]).default('error'),
  /** When set, any other API key (or none) is rejected with 401 `authentication_error`. */
  requireApiKey: z.string().min(1).optional(),
  /**
   * Report input and cache tokens the way the API does: input estimated from the request (four characters a token),
   * and for requests with `cache_control` breakpoints, the first request writes its prefix and later ones read it
   * (see `prompt-cache.ts`). Off, a turn's usage is exactly what it scripts (input 100 unless scripted).
   * @default false
   */
  promptCache: z.boolean().default(false),
});

export type ApiErrorSpec = z.output<typeof apiErrorSpecSchema>;
export type ToolCall = z.output<typeof toolCallSchema>;
export type Turn = z.output<typeof turnSchema>;
export type Rule = z.output<typeof ruleSchema>;
/** A validated scenario, with defaults applied. */
export type Scenario = z.output<typeof scenarioSchema>;
/** What a scenario may be written as (defaults optional); what the JS API accepts. */
export type ScenarioInput = z.input<typeof scenarioSchema>;

/** One problem found in a scenario, located by YAML path (`rules[0].turns[1].tool.name`). */
export interface ScenarioIssue {
  path: string;
  message: string;
  /** 1-based line in the file, when known. */
  line?: number;
}

/** Thrown when a scenario file cannot be read, is not YAML, or does not fit the schema. */
export class ScenarioValidationError extends Error {
  override readonly name = 'ScenarioValidationError';
  constructor(
    readonly fileName: string,
    readonly issues: ScenarioIssue[],
  ) {
    const lines = issues.map((i) => {
      const where = [i.path, i.line === undefined ? '' : `(line ${i.line})`].filter(Boolean).join(' ');
      return `  ${where || '(file)'}: ${i.message}`;
    });
    super(`[SCENARIO_INVALID] ${fileName}: invalid scenario\n${lines.join('\n')}`);
  }
}

/** Formats a zod path as a YAML path: `rules[0].turns[1].tool`. */
export function formatYamlPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((out, key) => (typeof key === 'number' ? `${out}[${key}]` : out ? `${out}.${String(key)}` : String(key)), '');
}

/** Finds the line of the deepest node along `path` that exists in the document. */
function findLine(root: YamlNode | null, path: readonly PropertyKey[], lineCounter: LineCounter): number | undefined {
  let node: unknown = root;
  let found: YamlNode | undefined = root ?? undefined;
  for (const key of path) {
    if (isMap(node)) node = node.get(key, true);
    else if (isSeq(node) && typeof key === 'number') node = node.get(key, true);
    else break;
    if (node === undefined) break;
    found = node as YamlNode;
  }
  const offset = found?.range?.[0];
  return offset === undefined ? undefined : lineCounter.linePos(offset).line;
}

/**
 * Validates an already-parsed scenario value (from YAML, JSON or a JS literal).
 * @throws ScenarioValidationError naming `source` and each bad path
 */
export function validateScenario(value: unknown, source = '<scenario>'): Scenario {
  const result = scenarioSchema.safeParse(value);
  if (result.success) return result.data;
  throw new ScenarioValidationError(
    source,
    result.error.issues.map((issue) => ({ path: formatYamlPath(issue.path), message: issue.message })),
  );
}

/**
 * Parses scenario YAML (JSON is YAML too) and validates it.
 * @param fileName used in error messages only
 * @throws ScenarioValidationError with the YAML path and line of each problem
 */
export function parseScenario(text: string, fileName = '<scenario>'): Scenario {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new ScenarioValidationError(
      fileName,
      doc.errors.map((e) => ({ path: '', message: e.message, line: e.linePos?.[0]?.line })),
    );
  }
  const value: unknown = doc.toJS() ?? {};
  const result = scenarioSchema.safeParse(value);
  if (result.success) return result.data;
  throw new ScenarioValidationError(
    fileName,
    result.error.issues.map((issue) => ({
      path: formatYamlPath(issue.path),
      message: issue.message,
      line: findLine(doc.contents, issue.path, lineCounter),
    })),
  );
}

/**
 * Reads and validates a scenario file.
 * @throws ScenarioValidationError when the file is missing, unreadable or invalid
 */
export async function loadScenario(path: string): Promise<Scenario> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new ScenarioValidationError(path, [{ path: '', message: `cannot read the file: ${(error as Error).message}` }]);
  }
  return parseScenario(text, path);
}
