import { z } from 'zod';

/*
 * Inputs declared `type: object` (`inputs: { elicitation: { type: object } }`): a JSON object whose values are strings,
 * numbers or booleans (one level, like BMAD's elicitation context, a map of strings). A run carries it as its JSON text
 * among the other (string) inputs; prompts show it as `key: value` lines and `{{inputs.NAME.KEY}}` reads one key. Pure.
 */

/** A scalar an object input may hold. */
export type ObjectInputScalar = string | number | boolean;
export type ObjectInputValue = Record<string, ObjectInputScalar>;

/** The most keys an object input may have. */
export const MAX_OBJECT_INPUT_KEYS = 200;

/** An object input's value: one level of string, number or boolean values. */
export const objectInputValueSchema = z
  .record(z.string().regex(/^[A-Za-z0-9_-]+$/, 'expected a key of letters, digits, "_" or "-"'), z.union([z.string(), z.number(), z.boolean()]))
  .refine((value) => Object.keys(value).length <= MAX_OBJECT_INPUT_KEYS, `expected at most ${MAX_OBJECT_INPUT_KEYS} keys`);

/**
 * Reads an object input's text (what `--input NAME=@file.json` gave, or the JSON text a run carries): the object, or a
 * sentence saying what is wrong with it.
 */
export function parseObjectInput(text: string): { value: ObjectInputValue } | { problem: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    return { problem: `it is not valid JSON (${(err as Error).message})` };
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) return { problem: `expected a JSON object such as {"key": "value"}, got ${Array.isArray(json) ? 'an array' : JSON.stringify(json)}` };
  const parsed = objectInputValueSchema.safeParse(json);
  if (parsed.success) return { value: parsed.data };
  const issue = parsed.error.issues[0];
  const where = issue.path.length > 0 ? `key "${issue.path.join('.')}"` : 'the object';
  const nested = issue.code === 'invalid_union' ? 'its value must be a string, number or boolean (no nested objects or lists)' : issue.message;
  return { problem: `${where}: ${nested}` };
}

/** An object input as prompts show it: one `key: value` line per key, in the object's order. */
export function formatObjectInput(value: ObjectInputValue, indent = ''): string {
  return Object.entries(value)
    .map(([key, v]) => `${indent}${key}: ${String(v)}`)
    .join('\n');
}

/** The names of a pipeline's inputs declared `type: object`. */
export function objectInputNames(inputs: Record<string, { type?: string }> | undefined): string[] {
  return Object.entries(inputs ?? {})
    .filter(([, spec]) => spec.type === 'object')
    .map(([name]) => name);
}

/** An input whose `default` does not match its `type`: an object for a string input, or a string for an object input. */
export function findInputDefaultProblems(inputs: Record<string, { type?: string; default?: unknown }> | undefined): { path: PropertyKey[]; message: string }[] {
  return Object.entries(inputs ?? {}).flatMap(([name, spec]) => {
    if (spec.default === undefined) return [];
    const isObject = typeof spec.default === 'object';
    if (spec.type === 'object' && !isObject) return [{ path: ['inputs', name, 'default'], message: `input "${name}" is \`type: object\`, so its default must be an object such as { key: value }, not ${JSON.stringify(spec.default)}` }];
    if (spec.type !== 'object' && isObject) return [{ path: ['inputs', name, 'default'], message: `input "${name}" is a string input, so its default must be a string; add \`type: object\` to take an object` }];
    return [];
  });
}
