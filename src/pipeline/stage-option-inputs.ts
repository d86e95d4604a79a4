import { z } from 'zod';
import { PERMISSION_MODES } from './agent-access-schema.js';
import { durationSchema } from './duration-schema.js';
import { INPUT_TEMPLATE } from './input-template.js';
import type { PipelineDefinition } from './schema.js';

/*
 * Per-run values for stage options (ATLAS's `WithModel`, `WithTimeout`, `WithPermissionMode`): `model`, `timeout`,
 * `permissionMode` and `maxBudgetUsd` may be one run input, `{{inputs.NAME}}`, in a stage or in `defaults`. The run's
 * input check fills and validates them at start (a bad value fails the run at once, naming the input and the field),
 * and the workflow fills them the same way before it resolves its stages, so no template text ever reaches a backend.
 * Pure.
 */

/** The stage options a run input may fill. */
export const INPUT_FILLED_OPTIONS = ['model', 'timeout', 'permissionMode', 'maxBudgetUsd'] as const;
type FilledOption = (typeof INPUT_FILLED_OPTIONS)[number];

/** What each option's filled value must be, and how the text of an input becomes it. */
const FILLED: Record<FilledOption, { schema: z.ZodType; read: (text: string) => unknown; expected: string }> = {
  model: { schema: z.string().min(1), read: (t) => t.trim(), expected: 'a model name or id, such as sonnet or claude-sonnet-4-5' },
  timeout: { schema: durationSchema, read: (t) => (/^\d+$/.test(t.trim()) ? Number(t) : t.trim()), expected: 'a duration such as "90s", "30m" or "2h"' },
  permissionMode: { schema: z.enum(PERMISSION_MODES), read: (t) => t.trim(), expected: `one of ${PERMISSION_MODES.join(', ')}` },
  maxBudgetUsd: { schema: z.number().positive(), read: (t) => (t.trim() === '' ? NaN : Number(t)), expected: 'a number of US dollars above 0, such as 2 or 0.5' },
};

/** A value that could not fill its option: where, which input, and why. */
export interface StageOptionProblem {
  path: (string | number)[];
  message: string;
}

/** True when some stage (or `defaults`) fills an option from a run input: only such runs need {@link fillStageOptions}. */
export function usesInputOptions(pipeline: PipelineDefinition): boolean {
  return optionHolders(pipeline).some(({ holder }) => INPUT_FILLED_OPTIONS.some((o) => typeof holder[o] === 'string' && INPUT_TEMPLATE.test(holder[o] as string)));
}

/**
 * The pipeline with every `{{inputs.NAME}}` option replaced by the run's value of NAME, and the values that could not
 * be used (an input the run lacks, a value that is not what the option takes).
 */
export function fillStageOptions(pipeline: PipelineDefinition, inputs: Readonly<Record<string, string>>): { pipeline: PipelineDefinition; problems: StageOptionProblem[] } {
  const problems: StageOptionProblem[] = [];
  // A run started without our client may leave out an input that has a default: the default fills it, as in prompts.
  const defaults = Object.entries(pipeline.inputs ?? {}).flatMap(([name, spec]) => (typeof spec.default === 'string' ? [[name, spec.default] as const] : []));
  inputs = { ...Object.fromEntries(defaults), ...inputs };
  const fill = <T extends Record<string, unknown>>(holder: T, at: (string | number)[]): T => {
    const filled: Record<string, unknown> = { ...holder };
    for (const option of INPUT_FILLED_OPTIONS) {
      const name = typeof holder[option] === 'string' ? INPUT_TEMPLATE.exec(holder[option])?.[1] : undefined;
      if (name === undefined) continue;
      const where = [...at, option];
      const text = Object.hasOwn(inputs, name) ? inputs[name] : undefined;
      const value = text === undefined ? undefined : FILLED[option].read(text);
      if (text === undefined) problems.push({ path: where, message: `{{inputs.${name}}} names an input the run does not have; declare it under inputs: (with a default, or pass --input ${name}=…)` });
      else if (!FILLED[option].schema.safeParse(value).success) problems.push({ path: where, message: `input ${name} is "${text}", which ${option} cannot take: expected ${FILLED[option].expected} (pass --input ${name}=…)` });
      else filled[option] = value;
    }
    return filled as T;
  };
  const filled: PipelineDefinition = {
    ...pipeline,
    ...(pipeline.defaults ? { defaults: fill(pipeline.defaults, ['defaults']) } : {}),
    stages: pipeline.stages.map((s, i) => fill(s, ['stages', i])),
    ...(pipeline.finally ? { finally: pipeline.finally.map((s, i) => fill(s, ['finally', i])) } : {}),
  };
  return { pipeline: filled, problems };
}

function optionHolders(pipeline: PipelineDefinition): { holder: Record<string, unknown> }[] {
  return [pipeline.defaults ?? {}, ...pipeline.stages, ...(pipeline.finally ?? [])].map((holder) => ({ holder: holder as Record<string, unknown> }));
}

/**
 * What `validate` can tell before a run: an option that is a template but not one whole declared input (its text
 * would reach the backend as written), and an input's default that the option cannot take. A required input without
 * a default is checked when the run starts.
 */
export function findStageOptionTemplateProblems(pipeline: PipelineDefinition): StageOptionProblem[] {
  const problems: StageOptionProblem[] = [];
  const declared = pipeline.inputs ?? {};
  const holders: [Record<string, unknown>, (string | number)[]][] = [
    [pipeline.defaults ?? {}, ['defaults']],
    ...pipeline.stages.map((s, i): [Record<string, unknown>, (string | number)[]] => [s, ['stages', i]]),
    ...(pipeline.finally ?? []).map((s, i): [Record<string, unknown>, (string | number)[]] => [s, ['finally', i]]),
  ];
  for (const [holder, at] of holders) {
    for (const option of INPUT_FILLED_OPTIONS) {
      const value = holder[option];
      if (typeof value !== 'string' || !value.includes('{{')) continue;
      const name = INPUT_TEMPLATE.exec(value)?.[1];
      if (name === undefined) problems.push({ path: [...at, option], message: `"${value}" would reach the backend as written: ${option} takes its own value or one whole run input, "{{inputs.NAME}}"` });
      else if (!Object.hasOwn(declared, name)) problems.push({ path: [...at, option], message: `{{inputs.${name}}}: the pipeline declares no such input (add it under inputs:)` });
    }
  }
  // A default is what most runs get: check it now.
  const withDefaults = Object.keys(declared).filter((name) => typeof declared[name].default === 'string');
  const filled = fillStageOptions(pipeline, {}).problems.filter((p) => withDefaults.some((name) => p.message.startsWith(`input ${name} is`)));
  return [...problems, ...filled];
}
