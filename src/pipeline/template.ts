/** Step template rendering: `{{inputs.feature}}`, `{{stages.spec.outputs.title}}`, `{{run.id}}`. Pure. */

export interface TemplateStage {
  summary: string;
  outputs: Record<string, unknown>;
  artifacts: string[];
}

export interface TemplateContext {
  inputs: Record<string, string>;
  stages: Record<string, TemplateStage>;
  run: { id: string; pipeline: string };
  attempt: number;
}

/** Thrown when a template names a variable the context lacks; never renders a silent empty string. */
export class TemplateError extends Error {
  override readonly name = 'TemplateError';
  constructor(
    readonly template: string,
    readonly variables: string[],
    readonly known: string[],
  ) {
    super(
      `[TEMPLATE_VARIABLE_UNKNOWN] ${template} uses ${variables.map((v) => `{{${v}}}`).join(', ')}, ` +
        `which ${variables.length > 1 ? 'are' : 'is'} not defined here. Defined: ${known.join(', ') || '(nothing)'}`,
    );
  }
}

const VARIABLE = /\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g;

/** Lists the variables a template uses, in order of first use. */
export function listTemplateVariables(template: string): string[] {
  return [...new Set([...template.matchAll(VARIABLE)].map((m) => m[1]))];
}

/**
 * Renders a template. `templateName` (a file path, or `stages[1].prompt` for inline templates)
 * appears in errors.
 * @throws TemplateError listing every unknown variable.
 */
export function renderTemplate(template: string, context: TemplateContext, templateName: string): string {
  const unknown: string[] = [];
  const rendered = template.replace(VARIABLE, (whole, name: string) => {
    const value = lookup(context, name);
    if (value === undefined) {
      unknown.push(name);
      return whole;
    }
    return formatValue(value);
  });
  if (unknown.length > 0) throw new TemplateError(templateName, [...new Set(unknown)], describeContext(context));
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
    ...Object.keys(context.stages).flatMap((id) => [`stages.${id}.summary`, `stages.${id}.outputs.*`, `stages.${id}.artifacts`]),
    'run.id',
    'run.pipeline',
    'attempt',
  ];
}
