import { z } from 'zod';

/**
 * The pipeline file schema. Field names follow DESIGN.md; every field a user may omit has a default
 * applied by `resolveStage`, not here, so a parsed pipeline still shows what the author wrote.
 */

/** A duration as written in the file: `90s`, `30m`, `2h`, `1d`, or a number of milliseconds. */
export const durationSchema = z.union([
  z.number().int().positive(),
  z.string().regex(/^\d+(\.\d+)?\s*(ms|s|m|h|d)$/, 'expected a duration such as "90s", "30m" or "2h"'),
]);

export const BACKENDS = ['claude-cli', 'anthropic-api'] as const;
export type Backend = (typeof BACKENDS)[number];

export const PERMISSION_MODES = ['default', 'acceptEdits', 'dontAsk', 'bypassPermissions', 'plan', 'auto'] as const;

const identifier = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'expected an identifier: a letter, then letters, digits, "-" or "_"');

/** Options any stage may set, and `defaults` may set for all stages. */
const stageOptionsShape = {
  backend: z.enum(BACKENDS).optional(),
  model: z.string().min(1).optional(),
  fallbackModel: z.string().min(1).optional(),
  timeout: durationSchema.optional(),
  heartbeatTimeout: durationSchema.optional(),
  /** How long the agent may go without any output (text, tool call, tool result) before it counts as stalled. */
  stallTimeout: durationSchema.optional(),
  retries: z.number().int().min(0).max(100).optional(),
  permissionMode: z.enum(PERMISSION_MODES).optional(),
  allowedTools: z.array(z.string().min(1)).optional(),
  disallowedTools: z.array(z.string().min(1)).optional(),
  maxBudgetUsd: z.number().positive().optional(),
  maxTokens: z.number().int().positive().optional(),
};

export const stageDefaultsSchema = z.strictObject(stageOptionsShape);

export const stageSchema = z.strictObject({
  id: identifier,
  description: z.string().optional(),
  needs: z.array(identifier).optional(),
  /** Agent definition file (markdown with frontmatter), relative to the pipeline file. */
  agent: z.string().min(1).optional(),
  /** Step template: a file path relative to the pipeline file, or an inline multi-line template. */
  prompt: z.string().min(1),
  ...stageOptionsShape,
});

const inputSchema = z.strictObject({
  description: z.string().optional(),
  required: z.boolean().optional(),
  default: z.string().optional(),
});

export const pipelineSchema = z.strictObject({
  name: identifier,
  description: z.string().optional(),
  inputs: z.record(identifier, inputSchema).optional(),
  defaults: stageDefaultsSchema.optional(),
  budgetUsd: z.number().positive().optional(),
  stages: z.array(stageSchema).min(1, 'a pipeline needs at least one stage'),
});

export type PipelineDefinition = z.infer<typeof pipelineSchema>;
export type StageDefinition = z.infer<typeof stageSchema>;
export type StageDefaults = z.infer<typeof stageDefaultsSchema>;
export type Duration = z.infer<typeof durationSchema>;
