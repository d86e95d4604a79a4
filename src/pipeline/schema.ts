import { z } from 'zod';
import { mcpServerSchema } from './agent-access-schema.js';
import { durationSchema } from './duration-schema.js';
import { limitsSchema } from './limit-schema.js';
import { objectInputValueSchema } from './object-inputs.js';
import { stageDefaultsSchema } from './stage-options-schema.js';
import { identifierSchema, stageSchema, TEMPLATE_SYNTAXES } from './stage-schema.js';
import { workspaceSchema } from './workspace-schema.js';

/**
 * The pipeline file schema. Field names follow DESIGN.md; every field a user may omit has a default
 * applied by `resolveStage`, not here, so a parsed pipeline still shows what the author wrote.
 *
 * This module holds the top-level object; its larger parts have modules of their own: a stage (stage-schema.ts), the
 * options of a stage and of `defaults` (stage-options-schema.ts), what an agent may use and reach
 * (agent-access-schema.ts), and `workspace:` (workspace-schema.ts).
 */

export { durationSchema } from './duration-schema.js';
export type { Duration, DurationText, DurationUnit } from './duration.js';

/**
 * A pipeline `context:` file: a path, or `{path, optional, from}`. Read relative to the pipeline file's folder, or
 * with `from: workspace` from the run's workspace when each attempt starts (a shared `workspace.dir`).
 */
export const contextFileSchema = z.union([
  z.string().min(1),
  z.strictObject({ path: z.string().min(1), optional: z.boolean().optional(), from: z.enum(['pipeline', 'workspace']).optional() }),
]);
export type ContextFile = z.infer<typeof contextFileSchema>;

/** A run input the pipeline declares (`inputs: { NAME: … }`). */
const inputSchema = z.strictObject({
  description: z.string().optional(),
  required: z.boolean().optional(),
  /** `string` (default), or `object`: a JSON object of string, number or boolean values (see object-inputs.ts). */
  type: z.enum(['string', 'object']).optional(),
  /** A string; for `type: object`, an object. */
  default: z.union([z.string(), objectInputValueSchema]).optional(),
});

/**
 * The most stages a pipeline may have. A run's state (every stage's result) travels in one payload to `status` and
 * to the final result, and each stage adds events to the history: 1,000 stays well inside Temporal's limits (and fits
 * a 500-wide fan-out with its join).
 */
export const MAX_STAGES = 1000;
/** The most `finally` stages a pipeline may have; they run one after the other once the run has ended. */
export const MAX_FINALLY_STAGES = 100;

/** A pipeline file: its name, inputs, stage defaults, run-wide settings, workspace, stages and `finally` stages. */
export const pipelineSchema = z.strictObject({
  /** The pipeline's name, shown in `list` and run ids: a letter, then letters, digits, `-` or `_`. */
  name: identifierSchema,
  /** What the pipeline does, for people reading it. */
  description: z.string().optional(),
  /** The run inputs it takes (`--input NAME=value`), by name: `{ description, required, type, default }`. */
  inputs: z.record(identifierSchema, inputSchema).optional(),
  /** Stage options every stage gets unless it sets its own (`timeout`, `retries`, `model`, `permissionMode` …). */
  defaults: stageDefaultsSchema.optional(),
  /** Most stages running at once. @default unlimited */
  concurrency: z.number().int().min(1).optional(),
  /** Bound on the whole run. */
  timeout: durationSchema.optional(),
  /** Concurrency keys shared by every run, held for this run's whole life (docs/limits.md). */
  limits: limitsSchema.optional(),
  /** The whole run's spending cap, in US dollars (e.g. `5`); see `onBudgetExceeded`. @default no cap */
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
  /** Where the stages work: `repo` (a git repository; each run gets a worktree and branch) or `dir` (an existing folder). @default a plain folder of its own per run, under the worker's workspaces root */
  workspace: workspaceSchema.optional(),
  /** `stage`: stages running at the same time each work in their own worktree and branch, merged into the run's branch when they complete (git workspaces only). @default run */
  isolation: z.enum(['run', 'stage']).optional(),
  /** The stages, at least one; each runs once the stages in its `needs` are done, in file order among those ready. */
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
