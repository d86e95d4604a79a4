import { formatObjectInput, parseObjectInput } from './object-inputs.js';

/**
 * Step template rendering: `{{inputs.feature}}`, `{{stages.spec.outputs.title}}`, `{{run.id}}`,
 * `{{attempt}}`, `{{previous.failed}}`. One pass, so values that contain `{{…}}` are never
 * rendered again. `{{raw}}…{{/raw}}` is copied as written. Pure.
 */

export interface TemplateStage {
  summary: string;
  outputs: Record<string, unknown>;
  artifacts: string[];
  /**
   * `completed`; `failed` for a stage a dependent reads through `allowFailure`; for a `finally` stage also
   * `cancelled` or `skipped`, whose summary, outputs and artifacts are empty.
   */
  status?: string;
  /** The failure message of a failed stage; empty for a completed one. */
  error?: string;
  /** The agent's final answer without its report block (capped); absent for stages recorded before answers were kept. */
  answer?: string;
  /** The report's top-level fields besides the contract's (`{{stages.ID.report.FIELD}}`). */
  report?: Record<string, unknown>;
}

export interface TemplateContext {
  inputs: Record<string, string>;
  /** Completed earlier stages by id. */
  stages: Record<string, TemplateStage>;
  /** `status`, `error` and `delivery` are set for `finally` stages only, once the run has ended. */
  run: { id: string; pipeline: string; status?: string; error?: string; errorType?: string; delivery?: RunDeliveryOutcome };
  /** Inputs declared `type: object`, whose values are JSON text: `{{inputs.NAME}}` gives `key: value` lines, `{{inputs.NAME.KEY}}` one value. */
  objectInputs?: string[];
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

/** What `finally` stages see of the run's delivery (`{{run.delivery.push}}` …), which ran before them. */
export interface RunDeliveryOutcome {
  /** `pushed`, `failed`, `skipped` or `cancelled`; `none` when the pipeline does not push (`workspace.push`). */
  push: string;
  /** The pull request's URL; empty when none was opened. */
  pullRequest: string;
  /** The branch pushed; empty when nothing was pushed. */
  branch: string;
  /** Where to see the pushed work: the pull request, else the compare page; empty when there is neither. */
  url: string;
}

/** The `{{run.delivery.…}}` variables of a `finally` stage. */
export const RUN_DELIVERY_VARIABLES = ['run.delivery.push', 'run.delivery.pullRequest', 'run.delivery.branch', 'run.delivery.url'];

/**
 * `{{context}}` in a stage prompt: the text of the pipeline's `context:` files, one after the other (a missing optional
 * one adds nothing), for a `promptFormat: raw` prompt that places its context itself.
 */
export const CONTEXT_VARIABLE = 'context';

/**
 * `{{files}}` in a stage prompt: the stage's declared `inputs:` files, each under a `### <path>` heading with its content
 * in a fence (capped like context files), for a prompt that places its input files itself.
 */
export const FILES_VARIABLE = 'files';

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
/** A protected span: `{{raw}}` … `{{/raw}}`, copied as written without the markers. */
const RAW = /\{\{\s*raw\s*\}\}([\s\S]*?)\{\{\s*\/raw\s*\}\}/g;
/** Namespaces the pipeline fills; an unknown name in them is an error even with `passthrough`. */
const RESERVED = new Set(['inputs', 'stages', 'run', 'previous', 'stage', 'attempt']);

/** `strict`: every `{{name}}` must be known. `passthrough`: unknown names outside the reserved namespaces stay as written. */
export type TemplateSyntaxMode = 'strict' | 'passthrough';

/** True for a name in a namespace the pipeline fills (`inputs.`, `stages.`, `run.`, `previous.`, `stage.`, `attempt`). */
export function isReservedVariable(name: string): boolean {
  return RESERVED.has(name.split('.')[0]);
}

/** Lists the variables a template uses (outside `{{raw}}` spans), in order of first use. */
export function listTemplateVariables(template: string): string[] {
  return [...new Set([...template.replace(RAW, '').matchAll(VARIABLE)].map((m) => m[1]))];
}

/**
 * Renders a template. `templateName` (a file path, or `stage spec prompt (inline)`) appears in
 * errors. `extra` adds plain variables by full name, e.g. `{ stage_prompt: '…' }`. With `passthrough`,
 * an unknown name outside the reserved namespaces reaches the agent as written (`{{project_name}}`).
 * @throws TemplateError listing every unknown variable.
 */
export function renderTemplate(
  template: string,
  context: TemplateContext,
  templateName: string,
  extra: Record<string, string> = {},
  syntax: TemplateSyntaxMode = 'strict',
): string {
  const unknown: string[] = [];
  const renderPart = (part: string): string =>
    part.replace(VARIABLE, (whole, name: string) => {
      const value = Object.hasOwn(extra, name) ? extra[name] : lookup(context, name);
      if (value === undefined) {
        if (syntax === 'strict' || isReservedVariable(name)) unknown.push(name);
        return whole;
      }
      return formatValue(value);
    });
  let rendered = '';
  let from = 0;
  for (const match of template.matchAll(RAW)) {
    rendered += renderPart(template.slice(from, match.index)) + match[1];
    from = match.index + match[0].length;
  }
  rendered += renderPart(template.slice(from));
  if (unknown.length > 0) {
    const names = [...new Set(unknown)];
    throw new TemplateError(templateName, names, [...describeContext(context), ...Object.keys(extra)], explainUnknown(names, context));
  }
  return rendered;
}

function lookup(context: TemplateContext, name: string): unknown {
  const [head, id, field] = name.split('.');
  if (head === 'inputs' && context.objectInputs?.includes(id) && Object.hasOwn(context.inputs, id)) return lookupObjectInput(context.inputs[id], name.split('.').slice(2));
  // `{{run.error}}` is the message (as before `run.error.*` existed); `{{run.error.type}}` and `.message` its parts.
  if (head === 'run' && id === 'error' && field !== undefined && context.run.status !== undefined) {
    if (field === 'type' && context.run.errorType !== undefined && name.split('.').length === 3) return context.run.errorType;
    if (field === 'message' && name.split('.').length === 3) return context.run.error ?? '';
    return undefined;
  }
  // A stage that was cancelled or skipped before it reported (which `finally` stages can read) has no outputs.
  if (head === 'stages' && (field === 'outputs' || field === 'report') && name.split('.').length > 3 && Object.hasOwn(context.stages, id)) {
    const status = context.stages[id].status;
    if (status === 'cancelled' || status === 'skipped') return '';
  }
  let value: unknown = context;
  for (const part of name.split('.')) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** An object input's value: all of it as `key: value` lines, or one key's value; undefined for an unknown key. */
function lookupObjectInput(text: string, path: string[]): unknown {
  const parsed = parseObjectInput(text);
  if ('problem' in parsed) return path.length === 0 ? text : undefined;
  if (path.length === 0) return formatObjectInput(parsed.value);
  return path.length === 1 && Object.hasOwn(parsed.value, path[0]) ? parsed.value[path[0]] : undefined;
}

function formatValue(value: unknown): string {
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value.join('\n');
  if (typeof value === 'object' && value !== null) return JSON.stringify(value, null, 2);
  return String(value);
}

function describeContext(context: TemplateContext): string[] {
  return [
    ...Object.keys(context.inputs).flatMap((k) => [`inputs.${k}`, ...objectInputKeys(context, k).map((key) => `inputs.${k}.${key}`)]),
    ...Object.entries(context.stages).flatMap(([id, stage]) => [
      `stages.${id}.summary`,
      ...Object.keys(stage.outputs).map((key) => `stages.${id}.outputs.${key}`),
      ...(stage.answer === undefined ? [] : [`stages.${id}.answer`]),
      ...Object.keys(stage.report ?? {}).map((key) => `stages.${id}.report.${key}`),
      `stages.${id}.artifacts`,
      ...(stage.status === undefined ? [] : [`stages.${id}.status`, `stages.${id}.error`]),
    ]),
    'run.id',
    'run.pipeline',
    ...(context.run.status === undefined ? [] : ['run.status', 'run.error', ...(context.run.errorType === undefined ? [] : ['run.error.type']), 'run.error.message']),
    ...(context.run.delivery === undefined ? [] : RUN_DELIVERY_VARIABLES),
    'attempt',
    ...(context.previous ? ['previous.failed'] : []),
    ...(context.workspace ? ['workspace.diff', 'workspace.branch', 'workspace.base'] : []),
  ];
}

function objectInputKeys(context: TemplateContext, name: string): string[] {
  if (!context.objectInputs?.includes(name)) return [];
  const parsed = parseObjectInput(context.inputs[name]);
  return 'value' in parsed ? Object.keys(parsed.value) : [];
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
