import type { OmittedArtifacts } from './output-caps.js';

/**
 * What one stage attempt reports back to the workflow. Kept small on purpose: Temporal payloads are
 * limited (2 MiB), so artifacts are referenced by path, size and hash, never inlined.
 */
export interface StageResult {
  status: 'completed' | 'needs_input' | 'failed';
  summary: string;
  outputs: Record<string, unknown>;
  /** New or changed files, sorted by path: at most 1,000 (`MAX_LISTED_ARTIFACTS`); the rest are in `artifactsOmitted`. */
  artifacts: ArtifactRef[];
  /** Changed files beyond the listed ones, counted by top folder; absent when every file is listed. */
  artifactsOmitted?: OmittedArtifacts;
  sessionId?: string;
  /** Of every attempt of this execution of the stage, not only the last (a retry carries the earlier ones on). */
  usage: TokenUsage;
  /** Like `usage`, all attempts; `null` when the model's price is unknown. */
  costUsd: number | null;
  numTurns: number;
  durationMs: number;
  warnings: string[];
  /** The agent's question or blocker when `status` is `needs_input`. */
  question?: string;
  /** Set when the question is a `BLOCKED: reason` line (not a closing question): `onBlocked: fail` ends the run on it. */
  blocked?: boolean;
  /**
   * The agent's final answer text, without its report block (`{{stages.ID.answer}}`), cut to `OUTPUT_CAPS.answerBytes`
   * with a warning; the whole text stays in the transcript.
   */
  answer?: string;
  /** Where the whole answer is kept when `answer` was cut (read it with `readFinalAnswer`, `final-answer`). */
  answerRef?: FinalAnswerRef;
  /**
   * The report's top-level fields besides the contract's own (`issues`, `pr_ready` …): `{{stages.ID.report.FIELD}}`.
   * Capped like `outputs` (a field over its cap fails the stage `OUTPUT_TOO_LARGE`).
   */
  report?: Record<string, unknown>;
  /** The agent's own error when it reported `success: false`. */
  error?: string;
  /** A reviewer's verdict and findings. */
  verdict?: 'approve' | 'rework';
  feedback?: unknown[];
  /** The CLI backend adopted an agent process started ahead of time (warm start) instead of spawning one. */
  warmStart?: boolean;
  /** Tool calls the CLI denied during the attempt. */
  permissionDenials?: { tool: string; input: unknown }[];
  /**
   * Path of this attempt's raw transcript relative to the workers' workspaces folder
   * (`.agent-pipeline/runs/<run folder>/stages/<stage>/…/attempt-N.jsonl`); in results of releases before the
   * worker's own folder, relative to the run's folder (`.agent-pipeline/stages/…`).
   */
  transcript?: string;
  /** The commit a `commit: true` stage made on the run's branch. */
  commit?: string;
  /** Under `isolation: stage`: merging the stage's branch into the run's conflicted; a person resolves it. */
  mergeConflict?: { branch: string; files: string[]; message: string };
  /** Absolute path of the run's workspace on the worker that ran the attempt. */
  workspace: string;
  /** Which attempt of the stage produced this result (1-based). */
  attempt: number;
}

/**
 * A stage's whole final answer (without its report block), kept by the worker that ran it. With `store`, `key` is an
 * object in the workers' object store (`AGENT_PIPELINE_STORE`): `runs/<sha256 of the run id>/answers/<sha256 of the
 * text>`, encrypted there when the workers encrypt, readable from any host with the same store settings. Without it
 * (runs recorded before answers went to the store, or activities built without a store), `key` is a path relative to
 * the workers' workspaces folder (`.agent-pipeline/runs/<run folder>/stages/<stage>/…/attempt-N.answer.md`).
 */
export interface FinalAnswerRef {
  key: string;
  bytes: number;
  sha256: string;
  /** Set when `key` names an object store object rather than a file in the workers' workspaces folder. */
  store?: true;
}

export interface ArtifactRef {
  /** Path relative to the run's workspace, with `/` separators. */
  path: string;
  bytes: number;
  sha256: string;
}

export interface TokenUsage {
  /** Input tokens billed at the full input price (the API's `input_tokens`: neither read from nor written to the prompt cache). */
  inputTokens: number;
  outputTokens: number;
  /** Input tokens read from the prompt cache (`cache_read_input_tokens`), billed at the cache read price. */
  cacheReadTokens?: number;
  /** Input tokens written to the prompt cache (`cache_creation_input_tokens`), billed at the cache write price. */
  cacheWriteTokens?: number;
}
