import { z } from 'zod';

/*
 * Command stages: a stage with `run:` runs a command in the run's workspace instead of an agent (a test script, a
 * tracker update). Its fields, and the checks that keep whoever starts a run from injecting a command: `run:` is
 * literal text (no `{{…}}`), and values from the run reach the command only through `env:`. Part of the pipeline file
 * schema (stage-schema.ts). Pure.
 */

/** The backend name a command stage resolves to: the worker's built-in command runner (activities/backends/command/). */
export const COMMAND_BACKEND = 'command';

/** An environment variable name as `env:` and `passEnv:` take it. */
export const envNameSchema = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'expected an environment variable name: letters, digits and "_", not starting with a digit');

/** The fields a command stage adds to a stage. */
export const commandStageShape = {
  /**
   * The command: a string runs through `sh -c` (`npm test`), a list is the argv run without a shell (`[npm, test]`).
   * Literal text: `{{…}}` is refused here; give run values through `env:`.
   */
  run: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]).optional(),
  /** Variables for the command; values are templates (`BEAD: "{{inputs.bead_id}}"`), so a run's values reach it as data only. */
  env: z.record(envNameSchema, z.string()).optional(),
  /** Variables of the worker's own environment the command gets, each only if the worker allows it in `AGENT_PIPELINE_COMMAND_ENV`. */
  passEnv: z.array(envNameSchema).optional(),
  /** `json`: the last line of the command's stdout, a JSON object, becomes the stage's `outputs`. */
  outputs: z.literal('json').optional(),
};

/** The stage fields that only an agent uses, refused on a command stage (`defaults:` may still set them for the agents). */
export const AGENT_ONLY_FIELDS = [
  'agent', 'prompt', 'inputs', 'mcpServers', 'review', 'output', 'expects', 'templateSyntax', 'appendSystemPrompt', 'backend', 'model',
  'fallbackModel', 'stallTimeout', 'firstOutputTimeout', 'onBlocked', 'contractRetries', 'permissionMode', 'allowedTools', 'disallowedTools',
  'addDirs', 'maxBudgetUsd', 'maxTokens', 'maxContinuations', 'cache', 'bare', 'onPermissionDenied', 'onPermissionRequest', 'permissionRequest',
  'answer', 'contract', 'promptFormat',
] as const;

/** The command fields, refused on an agent stage. */
const COMMAND_ONLY_FIELDS = ['env', 'passEnv', 'outputs'] as const;

/** Whether a stage (as written, or resolved) is a command stage. */
export function isCommandStage(stage: { run?: unknown }): boolean {
  return stage.run !== undefined;
}

/** A problem of one stage's command fields, at a path inside the stage. */
export interface CommandFieldProblem {
  path: PropertyKey[];
  message: string;
}

/**
 * What is wrong with a stage's command fields: a template inside `run:`, an agent option on a command stage, a command
 * option on an agent stage. Pure.
 */
export function findCommandFieldProblems(stage: Record<string, unknown> & { id?: unknown; run?: string | string[] }): CommandFieldProblem[] {
  const id = typeof stage.id === 'string' ? stage.id : '?';
  if (stage.run === undefined) {
    return COMMAND_ONLY_FIELDS.filter((field) => stage[field] !== undefined).map((field) => ({
      path: [field],
      message: `\`${field}\` belongs to a command stage; stage "${id}" has no \`run:\` (add the command, or remove \`${field}\`)`,
    }));
  }
  const problems: CommandFieldProblem[] = [];
  const parts = typeof stage.run === 'string' ? [stage.run] : stage.run;
  parts.forEach((part, i) => {
    if (!part.includes('{{')) return;
    problems.push({
      path: typeof stage.run === 'string' ? ['run'] : ['run', i],
      message:
        `stage "${id}": \`run:\` is literal text and may not hold a template ("${part}"), so that no input can change the command; ` +
        'pass the value through `env:` and read the variable in the command, e.g. `env: { BEAD: "{{inputs.bead_id}}" }` with `run: bd update "$BEAD"`',
    });
  });
  for (const field of AGENT_ONLY_FIELDS) {
    if (stage[field] === undefined) continue;
    problems.push({ path: [field], message: `stage "${id}" runs a command (\`run:\`), which has no agent: \`${field}\` does not apply; remove it, or remove \`run:\` to run an agent` });
  }
  return problems;
}
