/**
 * Step template rendering: `{{inputs.feature}}`, `{{stages.spec.outputs.title}}`, `{{run.id}}`,
 * `{{attempt}}`, `{{previous.failed}}`. One pass, so values that contain `{{…}}` are never
 * rendered again. Pure.
 */

export interface TemplateStage {
  summary: string;
  outputs: Record<string, unknown>;
  artifacts: string[];
}

export interface TemplateContext {
  inputs: Record<string, string>;
  /** Completed earlier stages by id. */
  stages: Record<string, TemplateStage>;
  run: { id: string; pipeline: string };
  /** The attempt of the stage being rendered (1-based). */
  attempt: number;
  /**
   * The previous attempt of this stage: `failed` is its failure message, or an empty string on the
   * first attempt. Absent where no attempt is being rendered (then `{{previous.failed}}` is unknown).
   */
  previous?: { failed: string };
  /** The run's git worktree: `diff` is its branch's committed changes against the base it started from. */
  workspace?: { diff: string; branch: string; base: string };
}

/** Thrown when a template names a variable the context lacks; never renders a silent empty string. */
export class TemplateError extends Error {
  override readonly name = 'TemplateError';
  constructor(
    readonly template: string,
    readonly variables: string[],
    readonly known: string[],
    hints: string[] = [],
  ) {
    super(
      `[TEMPLATE_VARIABLE_UNKNOWN] ${template} uses ${variables.map((v) => `{{${v}}}`).join(', ')}, ` +
        `which ${variables.length > 1 ? 'are' : 'is'} not defined here${hints.length ? ` (${hints.join('; ')})` : ''}. ` +
        `Defined: ${known.join(', ') || '(nothing)'}`,
    );
  }
}

const VARIABLE = /\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g;

/** Lists the variables a template uses, in order of first use. */
export function listTemplateVariables(template: string): string[] {
  return [...new Set([...template.matchAll(VARIABLE)].map((m) => m[1]))];
}

/**
 * Renders a template. `templateName` (a file path, or `stage spec prompt (inline)`) appears in
 * errors. `extra` adds plain variables by full name, e.g. `{ stage_prompt: '…' }`.
 * @throws TemplateError listing every unknown variable.
 */
export function renderTemplate(
  template: string,
  context: TemplateContext,
  templateName: string,
  extra: Record<string, string> = {},
): string {
  const unknown: string[] = [];
  const rendered = template.replace(VARIABLE, (whole, name: string) => {
    const value = Object.hasOwn(extra, name) ? extra[name] : lookup(context, name);
    if (value === undefined) {
      unknown.push(name);
      return whole;
    }
    return formatValue(value);
  });
  if (unknown.length > 0) {
    const names = [...new Set(unknown)];
    throw new TemplateError(templateName, names, [...describeContext(context), ...Object.keys(extra)], explainUnknown(names, context));
  }
  return rendered;
}

function lookup(context: TemplateContext, name: string): unknown {
  let value: unknown = context;
  for (const part of name.split('.')) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

function formatValue(value: unknown): string {
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value.join('\n');
  if (typeof value === 'object' && value !== null) return JSON.stringify(value, null, 2);
  return String(value);
}

function describeContext(context: TemplateContext): string[] {
  return [
    ...Object.keys(context.inputs).map((k) => `inputs.${k}`),
    ...Object.entries(context.stages).flatMap(([id, stage]) => [
      `stages.${id}.summary`,
      ...Object.keys(stage.outputs).map((key) => `stages.${id}.outputs.${key}`),
      `stages.${id}.artifacts`,
    ]),
    'run.id',
    'run.pipeline',
    'attempt',
    ...(context.previous ? ['previous.failed'] : []),
    ...(context.workspace ? ['workspace.diff', 'workspace.branch', 'workspace.base'] : []),
  ];
}

/** A sentence per unknown `stages.ID…` variable whose stage has no result here. */
function explainUnknown(names: string[], context: TemplateContext): string[] {
  const missingStages = new Set(
    names
      .filter((name) => name.startsWith('stages.'))
      .map((name) => name.split('.')[1])
      .filter((id) => id && !Object.hasOwn(context.stages, id)),
  );
  return [...missingStages].map((id) => `stage "${id}" has not completed before this one; list it under \`needs\``);
}
