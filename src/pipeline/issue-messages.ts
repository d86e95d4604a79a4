import type { z } from 'zod';
import { findClosestName } from './closest-name.js';
import { defOf, isDuration, isInputTemplateUnion, numberBounds, schemaAt, unwrap } from './schema-walk.js';

/*
 * What a person is told about a value the pipeline schema rejects: the value, and what is allowed instead.
 * Zod's own messages ("Invalid option", "Too big: expected number to be <=100") hide the value and half the
 * rule, so every issue is described here, in one place, from the issue (parsed with `reportInput: true`) and
 * from the schema at its path (for a number's whole range, or to know that a field is a duration).
 */

/** The parts of a zod issue the messages use; the input is there when parsed with `reportInput: true`. */
interface IssueLike {
  readonly code: string;
  readonly path: readonly PropertyKey[];
  readonly message: string;
  readonly input?: unknown;
  readonly values?: readonly unknown[];
  readonly keys?: readonly string[];
  readonly expected?: string;
  readonly origin?: string;
  readonly minimum?: number | bigint;
  readonly maximum?: number | bigint;
  readonly inclusive?: boolean;
  readonly errors?: readonly (readonly IssueLike[])[];
}

/** What each enum field's values are called: `"gpt-cli" is not a backend`. Fields not listed are "a valid FIELD". */
const ENUM_NOUNS: Record<string, string> = {
  backend: 'a backend',
  permissionMode: 'a permission mode',
  onPermissionDenied: 'a choice for onPermissionDenied',
  onPermissionRequest: 'a choice for onPermissionRequest',
  onFailure: 'a choice for onFailure',
  onBlocked: 'a choice for onBlocked',
  nonRetryable: 'a failure type',
  onMaxRounds: 'a choice for onMaxRounds',
  onTimeout: 'a choice for onTimeout',
  onBudgetExceeded: 'a choice for onBudgetExceeded',
  type: 'an MCP server type',
  inputType: 'an input type',
};

const DURATION_HELP = 'use a string such as "90s", "30m", "2h" or "1d", or a whole number of milliseconds above 0';

/**
 * The message for a value that is not one of `allowed`: `"gpt-cli" is not a backend; use claude-cli or
 * anthropic-api`. Exported so a check with a list known only at run time (registered backends) says the same.
 */
export function describeUnknownChoice(field: string, value: unknown, allowed: readonly string[]): string {
  return `${value === undefined ? 'the value' : show(value)} is not ${ENUM_NOUNS[field] ?? `a valid ${field || 'value'}`}; use ${orList(allowed)}`;
}

/** One described issue: the field it is about, and for an unknown field, that field's own key (to find its line). */
export interface DescribedIssue {
  path: PropertyKey[];
  message: string;
  /** The unknown key inside the object at `path`: the problem is about the object, but the key is where the typo is. */
  key?: string;
}

/**
 * The issues of a failed `schema.safeParse(value, { reportInput: true })`, each with a message naming the bad value.
 * Unknown fields are one issue each, so that each can be located at its own line.
 */
export function describeIssues(schema: z.ZodType, issues: readonly IssueLike[]): DescribedIssue[] {
  return flattenUnions(schema, issues).flatMap((issue) =>
    issue.code === 'unrecognized_keys' && issue.keys?.length
      ? issue.keys.map((key) => ({ path: [...issue.path], key, message: describeUnknownField(schema, issue.path, key) }))
      : [{ path: [...issue.path], message: describeIssue(schema, issue) }],
  );
}

/** A top-level `$schema:` field, and where the link to the JSON Schema goes instead. */
const SCHEMA_FIELD_MESSAGE =
  'unknown field "$schema"; link the JSON Schema with a comment on the first line instead: ' +
  '# yaml-language-server: $schema=<path to node_modules/agent-pipeline/dist/pipeline.schema.json>';

/** `unknown field "promt"; did you mean "prompt"?` when a field of the object at `path` is near the key. */
function describeUnknownField(schema: z.ZodType, path: readonly PropertyKey[], key: string): string {
  // JSON's way of naming a schema; in YAML, editors read it from a comment (docs/pipeline.md, "Editor support").
  if (key === '$schema' && path.length === 0) return SCHEMA_FIELD_MESSAGE;
  const closest = findClosestName(key, knownFields(schema, path));
  const hint = closest ? `did you mean "${closest}"?` : describeMisplacedField(schema, path, key);
  return `unknown field "${key}"${hint ? `; ${hint}` : ''}`;
}

/**
 * Where a field that is not a typo belongs, when it is a field of another level: a stage option written at the top
 * (`model: opus`, meant for `defaults:`), or a pipeline field written on a stage (`budgetUsd`, the whole run's cap).
 */
function describeMisplacedField(schema: z.ZodType, path: readonly PropertyKey[], key: string): string | undefined {
  if (path.length === 0 && knownFields(schema, ['defaults']).includes(key)) {
    return `"${key}" is a stage option: put it under \`defaults:\` for every stage, or on the stages that need it`;
  }
  const onStage = path.length === 2 && (path[0] === 'stages' || path[0] === 'finally') && typeof path[1] === 'number';
  if (onStage && knownFields(schema, []).includes(key)) {
    const own = key === 'budgetUsd' ? '; a stage\'s own spending cap is `maxBudgetUsd`' : '';
    return `"${key}" is a field of the whole pipeline: put it at the top level${own}`;
  }
  return undefined;
}

/** The field names the object at `path` allows (of every object a union there allows). */
function knownFields(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  const node = path.length === 0 ? unwrap(schema) : schemaAt(schema, path);
  const objects = (candidate: z.ZodType): z.ZodType[] => {
    const def = defOf(unwrap(candidate));
    return def.type === 'object' ? [unwrap(candidate)] : def.type === 'union' ? (def.options ?? []).flatMap(objects) : [];
  };
  return [...new Set((node ? objects(node) : []).flatMap((o) => Object.keys(defOf(o).shape ?? {})))];
}

/**
 * A union's issue stands for the branch the value was meant for, when one branch got past the value's type (an
 * `approval:` object with a bad `timeout` reports the timeout, not "expected true"); else it stays as it is.
 */
function flattenUnions(schema: z.ZodType, issues: readonly IssueLike[]): IssueLike[] {
  return issues.flatMap((issue) => {
    if (issue.code !== 'invalid_union' || !issue.errors?.length) return [issue];
    // An option that may also be `{{inputs.NAME}}`: the value was meant for the option itself.
    if (isInputTemplateUnion(schemaAt(schema, issue.path))) return issue.errors[0].map((i) => ({ ...i, path: [...issue.path, ...i.path] }));
    if (isDuration(schema, issue.path)) return [issue];
    const meant = issue.errors
      .filter((branch) => branch.some((i) => i.path.length > 0 || (i.code !== 'invalid_type' && i.code !== 'invalid_value')))
      .sort((a, b) => a.length - b.length);
    // Of several branches of the right type (two kinds of MCP server), the one with fewest problems was meant.
    if (meant.length === 0 || (meant.length > 1 && meant[0].length === meant[1].length)) return [issue];
    return flattenUnions(schema, meant[0].map((i) => ({ ...i, path: [...issue.path, ...i.path] })));
  });
}

function describeIssue(schema: z.ZodType, issue: IssueLike): string {
  const field = lastKey(issue.path);
  const got = 'input' in issue ? show(issue.input) : undefined;
  if (isDuration(schema, issue.path) && issue.input !== undefined) return `${got} is not a duration; ${DURATION_HELP}`;
  switch (issue.code) {
    case 'invalid_value':
      if (!issue.values) break;
      // `type` is an MCP server's or a run input's: named by where it is.
      return describeUnknownChoice(field === 'type' && issue.path.includes('inputs') ? 'inputType' : field, issue.input, issue.values.map((v) => String(v)));
    case 'too_small':
    case 'too_big':
      if (issue.origin === 'number') return `${got} is too ${issue.code === 'too_small' ? 'small' : 'large'}; use ${describeRange(schema, issue)}`;
      if (issue.origin === 'string' && issue.code === 'too_small') return 'is empty; give a value';
      if (issue.origin === 'array' && issue.code === 'too_small' && issue.message.startsWith('Too small')) return `the list is empty; give at least ${String(issue.minimum)}`;
      break;
    case 'invalid_type':
      if (issue.input === undefined) return `is required (${withArticle(issue.expected)})`;
      if (issue.expected === 'int') return `${got} is not a whole number; use ${describeRange(schema, issue)}`;
      return `${got} is not ${withArticle(issue.expected)}${issue.expected === 'array' ? describeListFix(schema, issue) : ''}`;
    case 'invalid_format':
      return `${got} is not valid: ${issue.message}`;
    case 'invalid_union': {
      const expected = unionExpectations(issue);
      if (expected.length > 0) return `${got} is not valid here; expected ${orList(expected)}`;
      break;
    }
  }
  return issue.message;
}

/**
 * How to write a value where a list is wanted: `needs: a` becomes `needs: [a]`, and `needs: a, b` (one string to
 * YAML) `needs: [a, b]`, when the list takes those items; else the shape of a list, with the field's name.
 */
function describeListFix(schema: z.ZodType, issue: IssueLike): string {
  const field = issue.path.at(-1);
  if (typeof field !== 'string') return '';
  const item = schemaAt(schema, [...issue.path, 0]);
  const value = issue.input;
  const candidates = typeof value === 'string' ? [value.split(','), [value], value.split(/\s+/)].map((parts) => parts.map((part) => part.trim())) : [[value]];
  const items = item && candidates.find((parts) => parts.every((part) => part !== '' && item.safeParse(part).success));
  if (items && ['string', 'number', 'boolean'].includes(typeof value)) return `; write \`${field}: [${items.map(flowScalar).join(', ')}]\``;
  return `; write a list: \`${field}: [ITEM, ...]\`, or one item a line, each after "- "`;
}

/** A value as an item of a YAML flow list (`[a, "b c"]`): as it is when YAML reads it back the same, else quoted. */
function flowScalar(value: unknown): string {
  if (typeof value !== 'string') return String(value);
  // Words YAML would read as another type (true, null, 1.5) or whose characters mean something in a flow list are quoted.
  const plain = /^[A-Za-z_][\w./@()*-]*$/.test(value) && !/^(true|false|yes|no|on|off|null|y|n)$/i.test(value);
  return plain ? value : JSON.stringify(value);
}

/** What each branch of a union wanted at its root: `a string or an object`. */
function unionExpectations(issue: IssueLike): string[] {
  const wanted = (issue.errors ?? []).flatMap((branch) =>
    branch.filter((i) => i.path.length === 0).map((i) => (i.code === 'invalid_value' && i.values ? i.values.map((v) => JSON.stringify(v)).join(' or ') : withArticle(i.expected))),
  );
  return [...new Set(wanted)];
}

/** `a whole number from 0 to 100`, from the number schema at the issue's path (or from the issue alone). */
function describeRange(schema: z.ZodType, issue: IssueLike): string {
  const bounds = numberBounds(schemaAt(schema, issue.path)) ?? {
    int: false,
    min: issue.code === 'too_small' ? { value: Number(issue.minimum), inclusive: issue.inclusive ?? true } : undefined,
    max: issue.code === 'too_big' ? { value: Number(issue.maximum), inclusive: issue.inclusive ?? true } : undefined,
  };
  const kind = bounds.int ? 'a whole number' : 'a number';
  const { min, max } = bounds;
  if (min && max && min.inclusive && max.inclusive) return `${kind} from ${min.value} to ${max.value}`;
  const parts = [
    min ? (min.inclusive ? `of at least ${min.value}` : `above ${min.value}`) : undefined,
    max ? (max.inclusive ? `at most ${max.value}` : `below ${max.value}`) : undefined,
  ].filter(Boolean);
  return parts.length ? `${kind} ${parts.join(' and ')}` : kind;
}

function lastKey(path: readonly PropertyKey[]): string {
  const key = [...path].reverse().find((k) => typeof k === 'string');
  return key === undefined ? '' : String(key);
}

/** A value as the person wrote it: strings quoted, lists and objects named. */
function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (Array.isArray(value)) return 'a list';
  if (value === null) return 'null';
  if (typeof value === 'object') return 'an object';
  return String(value);
}

function withArticle(expected: string | undefined): string {
  if (!expected) return 'a value';
  if (expected === 'int') return 'a whole number';
  if (expected === 'array') return 'a list';
  if (expected === 'record') return 'an object';
  return /^[aeiou]/.test(expected) ? `an ${expected}` : `a ${expected}`;
}

/** `a`, `a or b`, `a, b or c`. */
function orList(items: readonly string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`;
}
