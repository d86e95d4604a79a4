import { z } from 'zod';
import { commandStageShape, findCommandFieldProblems } from './command-stage.js';
import { mcpServerSchema } from './agent-access-schema.js';
import { durationSchema } from './duration-schema.js';
import { limitsSchema } from './limit-schema.js';
import { stageOptionsShape } from './stage-options-schema.js';

/*
 * One stage of the pipeline file (an entry of `stages:` or `finally:`): its id and what it runs after, its agent and
 * prompt, the files it expects, its review and approval, and the stage options (stage-options-schema.ts). Part of the
 * pipeline file schema (schema.ts).
 */

/** A name in the pipeline file (a stage id, an input, the pipeline): a letter, then letters, digits, `-` or `_`. */
export const identifierSchema = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'expected an identifier: a letter, then letters, digits, "-" or "_"');

/** A file a stage expects an earlier stage to have written: a path, or `{path, from}`. */
export const stageInputSchema = z.union([
  z.string().min(1),
  z.strictObject({
    path: z.string().min(1),
    from: identifierSchema.optional(),
    /** A missing optional file becomes a note in the prompt instead of failing the stage. */
    optional: z.boolean().optional(),
  }),
]);
export type StageInput = z.infer<typeof stageInputSchema>;

/** A stage this one runs after: an id, or `{stage, allowFailure}` to run also when that stage failed. */
export const stageNeedSchema = z.union([
  identifierSchema,
  z.strictObject({ stage: identifierSchema, allowFailure: z.boolean().optional() }),
]);
export type StageNeed = z.infer<typeof stageNeedSchema>;

/** `strict`: an unknown `{{variable}}` is an error. `passthrough`: it reaches the agent as written. */
export const TEMPLATE_SYNTAXES = ['strict', 'passthrough'] as const;
export type TemplateSyntax = (typeof TEMPLATE_SYNTAXES)[number];

/** `review:`: this stage reviews earlier work, and a `rework` verdict sends it back, up to `maxRounds` times. */
export const reviewSchema = z.strictObject({
  /** The stage (or stages) whose work this stage reviews; `rework` re-runs them and everything after. */
  of: z.union([identifierSchema, z.array(identifierSchema).min(1)]),
  /** Most review rounds (1 to 20) before `onMaxRounds` applies. @default 3 */
  maxRounds: z.number().int().min(1).max(20).optional(),
  /** At the cap: `ask` a person (default), `fail` the run, or `continue` with a warning. */
  onMaxRounds: z.enum(['ask', 'fail', 'continue']).optional(),
});

/** `approval:` with options (`approval: true` waits with none): how a person's approval of the stage is awaited. */
export const approvalSchema = z.strictObject({
  /** How long to wait for a person; without it the run waits indefinitely. */
  timeout: durationSchema.optional(),
  /** What a timeout means. */
  onTimeout: z.enum(['approve', 'reject']).optional(),
  /** Shown to the approver. */
  message: z.string().optional(),
});

/** A stage: an entry of `stages:` or `finally:`; it needs a `prompt`, an `agent` or a command to `run:`, unless it is an `approval` gate. */
export const stageSchema = z.strictObject({
  /** The stage's id, unique in the pipeline: a letter, then letters, digits, `-` or `_`. */
  id: identifierSchema,
  /** What the stage does, for people reading the pipeline. */
  description: z.string().optional(),
  /** Stages this one runs after: ids, or `{ stage, allowFailure: true }` to run also when that stage failed. @default none (starts at once) */
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
  /** This stage reviews earlier work: `{ of, maxRounds, onMaxRounds }`; its `rework` verdict re-runs `of` with the findings. */
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
  /** A command stage (`run:` and its fields, command-stage.ts): a command runs instead of an agent. */
  ...commandStageShape,
}).check((ctx) => {
  const stage = ctx.value;
  for (const problem of findCommandFieldProblems(stage)) ctx.issues.push({ code: 'custom', input: stage, ...problem });
  if (stage.prompt === undefined && stage.agent === undefined && stage.approval === undefined && stage.run === undefined) {
    ctx.issues.push({
      code: 'custom',
      input: stage,
      path: ['prompt'],
      message: 'a stage needs a `prompt` or an `agent`, or a command to `run:` (or only `approval`, for a gate where a person decides)',
    });
  }
});
export type StageDefinition = z.infer<typeof stageSchema>;
