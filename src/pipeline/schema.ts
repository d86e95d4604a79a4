import { z } from 'zod';
import { limitsSchema } from './limit-schema.js';
import { TOOL_NAME } from './tool-names.js';
import { FAILURE_TYPES } from '../failure-types.js';
import { durationSchema } from './duration.js';
import { objectInputValueSchema } from './object-inputs.js';

/**
 * The pipeline file schema. Field names follow DESIGN.md; every field a user may omit has a default
 * applied by `resolveStage`, not here, so a parsed pipeline still shows what the author wrote.
 */

export { durationSchema, type Duration, type DurationText, type DurationUnit } from './duration.js';

/** The backends every worker has. A worker may register more (`createPipelineWorker({ backends })`). */
export const BACKENDS = ['claude-cli', 'anthropic-api'] as const;
export type BuiltinBackendName = (typeof BACKENDS)[number];
/** A backend name: a built-in one, or one registered with the worker (validation checks which are allowed). */
// `string & {}` keeps editors suggesting the built-in names while allowing registered ones.
export type BackendName = BuiltinBackendName | (string & {});

export const PERMISSION_MODES = ['default', 'manual', 'acceptEdits', 'dontAsk', 'bypassPermissions', 'plan', 'auto'] as const;

/**
 * The name of a git remote configured in the repository (`origin`), never a URL or a path: a value git could read as
 * an option (`--receive-pack=…`) or as somewhere else to push to.
 */
export const REMOTE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** A tool name or rule for Claude Code (`Read`, `Bash(npm test:*)`); never something `claude` would read as a flag. */
const toolName = z.string().min(1).regex(TOOL_NAME, 'expected a tool name such as Read or "Bash(npm test:*)", not starting with "-"');

const identifier = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'expected an identifier: a letter, then letters, digits, "-" or "_"');

/** An MCP server as Claude Code's `--mcp-config` takes it: a command to spawn, or a URL. */
export const mcpServerSchema = z.union([
  z.strictObject({
    type: z.literal('stdio').optional(),
    command: z.string().min(1),
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), z.string()).optional(),
  }),
  z.strictObject({
    type: z.enum(['http', 'sse']),
    url: z.string().url(),
    headers: z.record(z.string(), z.string()).optional(),
  }),
]);

/** How long a stage's question (`BLOCKED: ...` or a closing question) waits for an answer, and what then. */
export const answerWaitSchema = z.strictObject({
  /** How long to wait for a person's answer. */
  timeout: durationSchema,
  /** `fail` the stage (default), `skip` it (its dependents still run), or `continue` the agent's session with `note`. */
  onTimeout: z.enum(['fail', 'skip', 'continue']).optional(),
  /** What the agent is told when it must go on without an answer (`continue`). */
  note: z.string().min(1).optional(),
});

/** How long a mid-turn permission request or question (`onPermissionRequest: ask`) waits, and what then. */
export const permissionRequestSchema = z.strictObject({
  /** How long the agent waits for a person's decision. @default 10m; it must stay under the stage's `timeout` */
  timeout: durationSchema.optional(),
  /** `deny` the call (default; the agent goes on without it) or `fail` the stage. */
  onTimeout: z.enum(['deny', 'fail']).optional(),
});

/** A host name (or IP address) an agent's sandboxed Bash may reach, optionally with a leading `*.` wildcard. */
const domainSchema = z
  .string()
  .regex(/^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$|^\[?[0-9A-Fa-f:.]+\]?$/, 'expected a host name such as github.com or *.npmjs.org, without a scheme, port or path');

/**
 * CLI stages: Claude Code's own sandbox around the agent's Bash (bubblewrap and socat on Linux, Seatbelt on macOS).
 * `true` (the default for a stage that may use Bash), `false` to turn it off where the worker allows it, or options.
 */
export const sandboxSchema = z.union([
  z.boolean(),
  z.strictObject({
    /** @default true */
    enabled: z.boolean().optional(),
    /** Hosts the agent's Bash may reach through the sandbox's proxy; none when omitted (the model endpoint always works). */
    allowedDomains: z.array(domainSchema).optional(),
    /** Let Claude Code run sandboxed Bash commands without `allowedTools` allowing them. @default false */
    autoAllowBash: z.boolean().optional(),
  }),
]);
export type SandboxOption = z.infer<typeof sandboxSchema>;

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
const stageOptionsShape = {
  /** Extra text for the system prompt of the stage; a template like the prompt (`{{inputs.NAME}}`, `{{stages.ID.summary}}`). */
  appendSystemPrompt: z.string().optional(),
  /** `claude-cli`, `anthropic-api`, or a backend registered with the worker (checked by `parsePipeline`). */
  backend: z.string().regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'expected a backend name such as claude-cli or anthropic-api').optional(),
  model: z.string().min(1).optional(),
  fallbackModel: z.string().min(1).optional(),
  /** Start-to-close timeout of one attempt. */
  timeout: durationSchema.optional(),
  heartbeatTimeout: durationSchema.optional(),
  /** How long the agent may go without any output (text, tool call, tool result) before it counts as stalled. */
  stallTimeout: durationSchema.optional(),
  /** Like `stallTimeout`, for the wait before the agent's first output (model warm-up, long first prompt). */
  firstOutputTimeout: durationSchema.optional(),
  retries: z.number().int().min(0).max(100).optional(),
  /** How the attempts are spaced and which failures are final (Temporal's retry policy); `retries` stays the count. */
  retry: retrySchema.optional(),
  /** A `BLOCKED: reason` answer: `wait` for a person's answer (default), or `fail` the run with `AGENT_BLOCKED` and the reason. */
  onBlocked: z.enum(['wait', 'fail']).optional(),
  /** Attempts whose answer breaks the output contract are retried this many times, then the stage fails. */
  contractRetries: z.number().int().min(0).max(10).optional(),
  permissionMode: z.enum(PERMISSION_MODES).optional(),
  allowedTools: z.array(toolName).optional(),
  disallowedTools: z.array(toolName).optional(),
  /** CLI backend: Claude Code's sandbox around Bash (see `sandboxSchema`); a stage's value replaces the defaults'. */
  sandbox: sandboxSchema.optional(),
  /** Extra directories the CLI agent may touch, relative to the pipeline file. */
  addDirs: z.array(z.string().min(1)).optional(),
  maxBudgetUsd: z.number().positive().optional(),
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

export const stageDefaultsSchema = z.strictObject(stageOptionsShape);

/** A file a stage expects an earlier stage to have written: a path, or `{path, from}`. */
export const stageInputSchema = z.union([
  z.string().min(1),
  z.strictObject({
    path: z.string().min(1),
    from: identifier.optional(),
    /** A missing optional file becomes a note in the prompt instead of failing the stage. */
    optional: z.boolean().optional(),
  }),
]);

/**
 * A pipeline `context:` file: a path, or `{path, optional, from}`. Read relative to the pipeline file's folder, or
 * with `from: workspace` from the run's workspace when each attempt starts (a shared `workspace.dir`).
 */
export const contextFileSchema = z.union([
  z.string().min(1),
  z.strictObject({ path: z.string().min(1), optional: z.boolean().optional(), from: z.enum(['pipeline', 'workspace']).optional() }),
]);

/** A stage this one runs after: an id, or `{stage, allowFailure}` to run also when that stage failed. */
export const stageNeedSchema = z.union([
  identifier,
  z.strictObject({ stage: identifier, allowFailure: z.boolean().optional() }),
]);

/** `strict`: an unknown `{{variable}}` is an error. `passthrough`: it reaches the agent as written. */
export const TEMPLATE_SYNTAXES = ['strict', 'passthrough'] as const;

export const reviewSchema = z.strictObject({
  /** The stage (or stages) whose work this stage reviews; `rework` re-runs them and everything after. */
  of: z.union([identifier, z.array(identifier).min(1)]),
  maxRounds: z.number().int().min(1).max(20).optional(),
  /** At the cap: `ask` a person (default), `fail` the run, or `continue` with a warning. */
  onMaxRounds: z.enum(['ask', 'fail', 'continue']).optional(),
});

export const approvalSchema = z.strictObject({
  /** How long to wait for a person; without it the run waits indefinitely. */
  timeout: durationSchema.optional(),
  /** What a timeout means. */
  onTimeout: z.enum(['approve', 'reject']).optional(),
  /** Shown to the approver. */
  message: z.string().optional(),
});

export const stageSchema = z.strictObject({
  id: identifier,
  description: z.string().optional(),
  needs: z.array(stageNeedSchema).optional(),
  /** Agent definition file (markdown with frontmatter), relative to the pipeline file. */
  agent: z.string().min(1).optional(),
  /**
   * Step template: a file path relative to the pipeline file, or an inline multi-line template.
   * Optional when the agent file says what to do; a stage with neither agent nor prompt is a pure
   * `approval` gate.
   */
  prompt: z.string().min(1).optional(),
  /** Files earlier stages must have written before this stage starts (workspace-relative). */
  inputs: z.array(stageInputSchema).optional(),
  /** MCP servers for this stage; merged over the pipeline's, a stage entry wins. */
  mcpServers: z.record(z.string().min(1), mcpServerSchema).optional(),
  /** Run the stage only when this condition on earlier outputs holds, e.g. `{{stages.test.outputs.passed}} == false`. */
  when: z.string().min(1).optional(),
  /** A failure of this stage does not fail the run; its dependents are skipped. */
  continueOnFailure: z.boolean().optional(),
  review: reviewSchema.optional(),
  /** After the stage completes, wait for a person to approve or reject. */
  approval: z.union([z.literal(true), approvalSchema]).optional(),
  /** Commit the stage's changes on the run's branch (needs `workspace.repo`). */
  commit: z.boolean().optional(),
  /** API backend: where the answer is written, a workspace-relative template. @default outputs/<stage>.md */
  output: z.string().min(1).optional(),
  /** Files (paths or globs, workspace-relative) the stage must leave; a missing one fails OUTPUT_MISSING. */
  expects: z.array(z.string().min(1)).min(1).optional(),
  /** Overrides the pipeline's `templateSyntax` for this stage's prompt. */
  templateSyntax: z.enum(TEMPLATE_SYNTAXES).optional(),
  /** Concurrency keys shared by every run, held while an attempt of this stage runs (docs/limits.md). */
  limits: limitsSchema.optional(),
  ...stageOptionsShape,
}).check((ctx) => {
  const stage = ctx.value;
  if (stage.prompt === undefined && stage.agent === undefined && stage.approval === undefined) {
    ctx.issues.push({
      code: 'custom',
      input: stage,
      path: ['prompt'],
      message: 'a stage needs a `prompt` or an `agent` (or only `approval`, for a gate where a person decides)',
    });
  }
});

const inputSchema = z.strictObject({
  description: z.string().optional(),
  required: z.boolean().optional(),
  /** `string` (default), or `object`: a JSON object of string, number or boolean values (see object-inputs.ts). */
  type: z.enum(['string', 'object']).optional(),
  /** A string; for `type: object`, an object. */
  default: z.union([z.string(), objectInputValueSchema]).optional(),
});

export const workspaceSchema = z.strictObject({
  /** A git repository (relative to the pipeline file); each run works in its own worktree of it. */
  repo: z.string().min(1).optional(),
  /**
   * An existing folder the run works in instead of a folder of its own (a caller's worktree, a shared folder): a
   * path relative to the pipeline file, or a template such as `{{inputs.worktree}}`. It must lie inside a folder the
   * worker allows (`AGENT_PIPELINE_ALLOWED_PATHS`); one run at a time writes in it. Exclusive with `repo`.
   */
  dir: z.string().min(1).optional(),
  /** The run's branch; a template, e.g. `agent/{{run.id}}`. */
  branch: z.string().min(1).optional(),
  /** The commit or branch the worktree starts from. @default HEAD */
  base: z.string().min(1).optional(),
  /** Push the run's branch once the run has completed (after `finally`). */
  push: z
    .strictObject({
      /** @default origin */
      remote: z.string().regex(REMOTE_NAME, 'expected the name of a remote configured in the repository, such as origin (not a URL or a path)').optional(),
      /** A rejected push: `rebase-once` (pull --rebase once, push again, a conflict fails), `ask` (same, a conflict waits for a person), `fail`. @default rebase-once */
      onConflict: z.enum(['rebase-once', 'ask', 'fail']).optional(),
    })
    .optional(),
  /** Open a pull request after the push (templates); needs `push`. */
  pullRequest: z
    .strictObject({
      title: z.string().min(1),
      body: z.string().optional(),
      /** The branch to merge into. @default the repository's default branch */
      base: z.string().min(1).optional(),
      draft: z.boolean().optional(),
    })
    .optional(),
  /** When the run's worktree is removed at the end of the run. @default always (kept) */
  keep: z.enum(['always', 'onFailure', 'never']).optional(),
});

/**
 * The most stages a pipeline may have. A run's state (every stage's result) travels in one payload to `status` and
 * to the final result, and each stage adds events to the history: 1,000 stays well inside Temporal's limits (and fits
 * a 500-wide fan-out with its join).
 */
export const MAX_STAGES = 1000;
/** The most `finally` stages a pipeline may have; they run one after the other once the run has ended. */
export const MAX_FINALLY_STAGES = 100;

export const pipelineSchema = z.strictObject({
  name: identifier,
  description: z.string().optional(),
  inputs: z.record(identifier, inputSchema).optional(),
  defaults: stageDefaultsSchema.optional(),
  /** Most stages running at once. @default unlimited */
  concurrency: z.number().int().min(1).optional(),
  /** Bound on the whole run. */
  timeout: durationSchema.optional(),
  /** Concurrency keys shared by every run, held for this run's whole life (docs/limits.md). */
  limits: limitsSchema.optional(),
  budgetUsd: z.number().positive().optional(),
  /** When the budget is spent: `ask` a person to raise it (default) or `fail` at once. */
  onBudgetExceeded: z.enum(['ask', 'fail']).optional(),
  /**
   * When a long run continues as new (a fresh history, same run id, its whole state carried): once Temporal suggests
   * it, or the history passes either limit. Only needed to hand over earlier than the defaults.
   */
  continueAsNew: z
    .strictObject({
      /** Events in one execution's history. @default 10000 */
      afterEvents: z.number().int().min(100).optional(),
      /** Size of one execution's history. @unit megabytes @default 10 */
      afterMb: z.number().positive().max(40).optional(),
    })
    .optional(),
  /** Files included in every stage's prompt, e.g. a product brief (relative to the pipeline file). */
  context: z.array(contextFileSchema).optional(),
  /** Folder (relative to the pipeline file) where a bare `prompt: implement` is looked up as `implement.md`. */
  promptsDir: z.string().min(1).optional(),
  /** How unknown `{{…}}` in prompts are treated; a stage may override it. @default strict */
  templateSyntax: z.enum(TEMPLATE_SYNTAXES).optional(),
  /** A file that replaces the built-in system prompt; it must contain `{{stage_prompt}}`. */
  systemPrompt: z.string().min(1).optional(),
  /** MCP servers every CLI stage gets. */
  mcpServers: z.record(z.string().min(1), mcpServerSchema).optional(),
  workspace: workspaceSchema.optional(),
  /** `stage`: stages running at the same time each work in their own worktree and branch, merged into the run's branch when they complete (git workspaces only). @default run */
  isolation: z.enum(['run', 'stage']).optional(),
  stages: z
    .array(stageSchema)
    .min(1, 'a pipeline needs at least one stage')
    .max(MAX_STAGES, `a pipeline may have at most ${MAX_STAGES} stages; split the work into several pipelines, or give one stage a list of items to work through`),
  /**
   * Stages that run once the run has ended (completed, failed or cancelled; not terminated), one after the
   * other, with `{{run.status}}` and `{{run.error}}`; their failure is a warning, not the run's outcome.
   */
  finally: z.array(stageSchema).min(1).max(MAX_FINALLY_STAGES, `a pipeline may have at most ${MAX_FINALLY_STAGES} finally stages; fold the clean-up into fewer stages`).optional(),
});

export type PipelineDefinition = z.infer<typeof pipelineSchema>;
export type StageDefinition = z.infer<typeof stageSchema>;
export type StageDefaults = z.infer<typeof stageDefaultsSchema>;
export type StageInput = z.infer<typeof stageInputSchema>;
export type StageNeed = z.infer<typeof stageNeedSchema>;
export type ContextFile = z.infer<typeof contextFileSchema>;
export type TemplateSyntax = (typeof TEMPLATE_SYNTAXES)[number];
export type McpServer = z.infer<typeof mcpServerSchema>;
