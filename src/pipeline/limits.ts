import { listTemplateVariables, renderTemplate } from './template.js';

/**
 * Concurrency keys shared by every run (`limits:` on a pipeline or a stage): at most `concurrency` holders of a key
 * at once, across runs and workers; the rest wait, first come first served (docs/limits.md). Pure, and free of zod
 * (the workflow renders keys): the checks `validate` reports and the rendering of key templates.
 */

/** The longest key once rendered (a key names its lease workflow and is listed). @unit characters */
export const MAX_LIMIT_KEY_LENGTH = 200;
/** The most keys one pipeline or stage may hold. */
export const MAX_LIMITS = 8;
/** The variables a key template may use: the run's inputs, its id and its pipeline's name. */
const KEY_VARIABLES = /^(inputs\.[A-Za-z0-9_-]+|run\.id|run\.pipeline)$/;

/** One entry of `limits:` as written (limit-schema.ts checks it). */
export interface LimitDefinition {
  /** A template over `{{inputs.…}}`, `{{run.id}}` and `{{run.pipeline}}`, e.g. `repo:{{inputs.repo}}`. */
  key: string;
  /** How many holders the key may have at once, across every run. */
  concurrency: number;
}

/** A key as a run holds it: rendered, with its limit. */
export interface LeaseKey {
  key: string;
  concurrency: number;
}

/** Problems of one `limits:` list: variables a key may not use or inputs the pipeline does not declare, keys named twice. */
export function findLimitProblems(limits: LimitDefinition[] | undefined, declaredInputs: string[], at: PropertyKey[]): { path: PropertyKey[]; message: string }[] {
  const problems: { path: PropertyKey[]; message: string }[] = [];
  const seen = new Set<string>();
  (limits ?? []).forEach((limit, i) => {
    const path = [...at, i, 'key'];
    for (const name of listTemplateVariables(limit.key)) {
      if (!KEY_VARIABLES.test(name)) {
        problems.push({ path, message: `a key may use {{inputs.NAME}}, {{run.id}} and {{run.pipeline}}, not {{${name}}}: it is decided when the run or stage starts` });
      } else if (name.startsWith('inputs.') && !declaredInputs.includes(name.slice('inputs.'.length))) {
        problems.push({ path, message: `{{${name}}} is not an input of the pipeline; declare it under \`inputs\` (known: ${declaredInputs.join(', ') || 'none'})` });
      }
    }
    if (seen.has(limit.key)) problems.push({ path, message: `key "${limit.key}" is listed twice; list each key once` });
    seen.add(limit.key);
  });
  return problems;
}

/**
 * The keys with their templates rendered, sorted by key (the order they are taken in, so that two holders of
 * overlapping keys cannot deadlock), the same key listed once with its smallest limit.
 * @throws TemplateError for a variable the run does not have; Error for a key that renders empty or too long
 */
export function renderLimitKeys(limits: LimitDefinition[] | undefined, run: { id: string; pipeline: string; inputs: Record<string, string> }, where: string): LeaseKey[] {
  const byKey = new Map<string, number>();
  for (const limit of limits ?? []) {
    const key = renderTemplate(limit.key, { inputs: run.inputs, stages: {}, run: { id: run.id, pipeline: run.pipeline }, attempt: 0 }, `${where} limits key`);
    if (key.length === 0 || key.length > MAX_LIMIT_KEY_LENGTH || /[\u0000-\u001f\u007f]/.test(key)) {
      throw new Error(`${where}: limits key "${limit.key}" renders to ${JSON.stringify(key.slice(0, 80))} (${key.length} characters); a key must be 1 to ${MAX_LIMIT_KEY_LENGTH} characters without control characters`);
    }
    byKey.set(key, Math.min(byKey.get(key) ?? limit.concurrency, limit.concurrency));
  }
  return [...byKey].map(([key, concurrency]) => ({ key, concurrency })).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

