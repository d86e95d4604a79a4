import { z } from 'zod';
import { FAILURE_TYPES } from '../failure-types.js';
import { PERMISSION_MODES, permissionRequestSchema, sandboxSchema, toolNameSchema } from './agent-access-schema.js';
import { durationSchema } from './duration-schema.js';
import { orInputTemplate } from './input-template.js';

/*
 * The options any stage may set and `defaults` may set for all of them: backend and model, timeouts, retries, what
 * happens when the agent is blocked or a person must answer, and how the prompt and report are shaped. Part of the
 * pipeline file schema (schema.ts); `resolveStage` (stage-options.ts) applies their defaults.
 */

/** The backends every worker has. A worker may register more (`createPipelineWorker({ backends })`). */
export const BACKENDS = ['claude-cli', 'anthropic-api'] as const;
export type BuiltinBackendName = (typeof BACKENDS)[number];
/** A backend name: a built-in one, or one registered with the worker (validation checks which are allowed). */
// `string & {}` keeps editors suggesting the built-in names while allowing registered ones.
export type BackendName = BuiltinBackendName | (string & {});

/** How long a stage's question (`BLOCKED: ...` or a closing question) waits for an answer, and what then. */
export const answerWaitSchema = z.strictObject({
  /** How long to wait for a person's answer. */
  timeout: durationSchema,
  /** `fail` the stage (default), `skip` it (its dependents still run), or `continue` the agent's session with `note`. */
  onTimeout: z.enum(['fail', 'skip', 'continue']).optional(),
  /** What the agent is told when it must go on without an answer (`continue`). */
  note: z.string().min(1).optional(),
});

/** `retry:`: Temporal's retry policy of the stage's activity (see retry-policy.ts); a stage's fields win over the defaults' one by one. */
export const retrySchema = z.strictObject({
  /** The wait before the first retry. @default 1s */
  initialInterval: durationSchema.optional(),
  /** Each wait is the previous one times this. @default 2 */
  backoffCoefficient: z.number().min(1).max(100).optional(),
  /** The longest wait between two attempts. @default 1m */
  maximumInterval: durationSchema.optional(),
  /** Failure types never retried (`RESPONSE_EMPTY`: an empty answer is final), on top of those the catalogue never retries. */
  nonRetryable: z.array(z.enum(FAILURE_TYPES)).optional(),
});

/** How a stage's prompt reaches the model: wrapped in the pipeline's system prompt, or exactly as written. */
export const PROMPT_FORMATS = ['wrapped', 'raw'] as const;
export type PromptFormat = (typeof PROMPT_FORMATS)[number];

/** Options any stage may set, and `defaults` may set for all stages. */
export const stageOptionsShape = {
  /** Extra text for the system prompt of the stage; a template like the prompt (`{{inputs.NAME}}`, `{{stages.ID.summary}}`). */
  appendSystemPrompt: z.string().optional(),
  /** `claude-cli`, `anthropic-api`, or a backend registered with the worker (checked by `parsePipeline`). */
  backend: z.string().regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'expected a backend name such as claude-cli or anthropic-api').optional(),
  /** A model name or id, or one run input, `{{inputs.NAME}}` (filled and checked as the run starts). */
  model: z.string().min(1).optional(),
  /** CLI stages: the model Claude Code switches to when `model` is overloaded (`--fallback-model`); the switch is a warning in the stage's result. */
  fallbackModel: z.string().min(1).optional(),
  /**
   * Start-to-close timeout of one attempt (Temporal's `startToCloseTimeout`): a duration string such as `"90s"`,
   * `"30m"`, `"2h"` or `"1d"`, or whole milliseconds; or one run input, `{{inputs.NAME}}`. @default 30m
   */
  timeout: orInputTemplate(durationSchema).optional(),
  /** A worker that sends no heartbeat for this long is taken for dead and the attempt is retried: a duration string (`"2m"`) or milliseconds. @default 2m */
  heartbeatTimeout: durationSchema.optional(),
  /** How long the agent may go without any output (text, tool call, tool result) before it counts as stalled: a duration string or milliseconds. @default 5m */
  stallTimeout: durationSchema.optional(),
  /** Like `stallTimeout`, for the wait before the agent's first output (model warm-up, long first prompt). @default 5m */
  firstOutputTimeout: durationSchema.optional(),
  /**
   * Attempts after the first when an attempt fails with a retryable failure, 0 to 100: Temporal's `maximumAttempts`
   * is `retries + 1` (so `retries: 0` runs the stage once). Spacing and final failures: `retry`. @default 3
   */
  retries: z.number().int().min(0).max(100).optional(),
  /** How often the worker checkpoints the run while this stage runs (besides at its start and end); the worker's setting when absent. */
  checkpoint: z.strictObject({
    /** The interval between checkpoints: a duration string (`"2m"`) or milliseconds. */
    every: durationSchema,
  }).optional(),
  /** How the attempts are spaced and which failures are final (Temporal's retry policy); `retries` stays the count. */
  retry: retrySchema.optional(),
  /** A `BLOCKED: reason` answer: `wait` for a person's answer (default), or `fail` the run with `AGENT_BLOCKED` and the reason. */
  onBlocked: z.enum(['wait', 'fail']).optional(),
  /** Attempts whose answer breaks the output contract are retried this many times, then the stage fails. */
  contractRetries: z.number().int().min(0).max(10).optional(),
  /**
   * CLI stages: Claude Code's permission mode (`--permission-mode`): `dontAsk` (only `allowedTools` run, the rest is
   * denied without asking), `acceptEdits`, `auto`, `bypassPermissions`, `manual`, `plan` or `default`; or one run
   * input, `{{inputs.NAME}}`. @default dontAsk
   */
  permissionMode: orInputTemplate(z.enum(PERMISSION_MODES)).optional(),
  /** CLI stages: tools the agent may use without asking (`--allowedTools`), e.g. `Read`, `Edit`, `Bash(npm test:*)`. */
  allowedTools: z.array(toolNameSchema).optional(),
  /** CLI stages: tools the agent may never use (`--disallowedTools`), e.g. `Bash(git push:*)`. */
  disallowedTools: z.array(toolNameSchema).optional(),
  /** CLI backend: Claude Code's sandbox around Bash (see `sandboxSchema`); a stage's value replaces the defaults'. */
  sandbox: sandboxSchema.optional(),
  /** Extra directories the CLI agent may touch, relative to the pipeline file. */
  addDirs: z.array(z.string().min(1)).optional(),
  /** The stage's spending cap per attempt, in US dollars (e.g. `0.5`); or one run input, `{{inputs.NAME}}`. @default no cap */
  maxBudgetUsd: orInputTemplate(z.number().positive()).optional(),
  /** API backend: the longest answer of one call, in tokens (`max_tokens`). @default 16000 */
  maxTokens: z.number().int().positive().optional(),
  /** API backend: how many times an answer cut off at `maxTokens` is continued in the same conversation. */
  maxContinuations: z.number().int().min(0).max(10).optional(),
  /** API backend: mark the system prompt, context blocks and conversation prefix for prompt caching. Default true. */
  cache: z.boolean().optional(),
  /** CLI backend: run `claude --bare` (no hooks, plugins, auto-memory or CLAUDE.md discovery); context goes in explicitly. */
  bare: z.boolean().optional(),
  /** What to do when the CLI denied tool calls: `fail` the stage, `ask` a person, or `ignore`. */
  onPermissionDenied: z.enum(['fail', 'ask', 'ignore']).optional(),
  /**
   * CLI backend: what happens when the agent calls a tool its `allowedTools` and permission mode do not settle, or asks
   * a question: `deny` it (default), or `ask` a person while the agent waits mid-turn (docs/permission-prompts.md).
   */
  onPermissionRequest: z.enum(['deny', 'ask']).optional(),
  /** The deadline of each `onPermissionRequest: ask` wait. */
  permissionRequest: permissionRequestSchema.optional(),
  /** What to do when the stage fails for good: `fail` the run, or `ask` a person (retry / skip / cancel). */
  onFailure: z.enum(['fail', 'ask']).optional(),
  /** Bound the wait for an answer to the agent's question; without it the run waits indefinitely. */
  answer: answerWaitSchema.optional(),
  /** Template of the message a `commit: true` stage commits with, e.g. `Bead {{inputs.bead_id}}: {{inputs.title}}`. */
  commitMessage: z.string().min(1).optional(),
  /**
   * `json` (default): the agent ends with the report block. `none`: no report is asked; the stage completes
   * when the agent finishes without error, its summary is the answer's last paragraph and it has no outputs.
   */
  contract: z.enum(['json', 'none']).optional(),
  /**
   * `wrapped` (default): the stage prompt is placed in the pipeline's system prompt with task, notes, inputs and
   * earlier work. `raw`: the prompt is sent exactly as written (its `{{…}}` filled), the system prompt is the agent
   * file and its references; only the output contract is added (nothing with `contract: none`).
   */
  promptFormat: z.enum(PROMPT_FORMATS).optional(),
};

/** `defaults:` of a pipeline: the options every stage gets unless it sets its own. */
export const stageDefaultsSchema = z.strictObject(stageOptionsShape);
export type StageDefaults = z.infer<typeof stageDefaultsSchema>;
