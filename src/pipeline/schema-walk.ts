import type { z } from 'zod';
import { durationSchema } from './schema.js';
import { inputTemplateSchema } from './input-template.js';

/*
 * Walks the pipeline's zod schema the way issue-messages.ts needs it: the schema at an issue's path, what wraps it, a
 * number's bounds, whether a field is a duration. Zod 4 keeps these in each schema's `_zod.def`.
 */

interface Bound {
  value: number;
  inclusive: boolean;
}

export function numberBounds(node: z.ZodType | undefined): { int: boolean; min?: Bound; max?: Bound } | undefined {
  const number = node && unionMember(node, 'number');
  if (!number) return undefined;
  const bounds: { int: boolean; min?: Bound; max?: Bound } = { int: false };
  for (const check of (defOf(number).checks ?? []) as { _zod: { def: { check: string; value?: number; inclusive?: boolean; format?: string } } }[]) {
    const def = check._zod.def;
    if (def.check === 'number_format' && (def.format === 'safeint' || def.format === 'int32')) bounds.int = true;
    else if (def.check === 'greater_than' && def.value !== undefined) bounds.min = { value: def.value, inclusive: def.inclusive ?? false };
    else if (def.check === 'less_than' && def.value !== undefined) bounds.max = { value: def.value, inclusive: def.inclusive ?? false };
  }
  return bounds;
}

/** True when the field at `path` is a duration (`timeout: 30m`). */
export function isDuration(schema: z.ZodType, path: readonly PropertyKey[]): boolean {
  const node = schemaAt(schema, path);
  return node === durationSchema || (isInputTemplateUnion(node) && (node!.def as unknown as DefLike).options?.[0] === durationSchema);
}

/** A union of an option's own schema and `{{inputs.NAME}}` (input-template.ts). */
export function isInputTemplateUnion(node: z.ZodType | undefined): boolean {
  const def = node?.def as unknown as DefLike | undefined;
  return def?.type === 'union' && def.options?.[1] === inputTemplateSchema;
}

export interface DefLike {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  element?: z.ZodType;
  valueType?: z.ZodType;
  options?: z.ZodType[];
  in?: z.ZodType;
  checks?: unknown[];
}

export function defOf(node: z.ZodType): DefLike {
  return (node as unknown as { _zod: { def: DefLike } })._zod.def;
}

/** Optional, default and the like wrap the schema that says what the value must be. */
export function unwrap(node: z.ZodType): z.ZodType {
  let current = node;
  for (let def = defOf(current); def.innerType || (def.type === 'pipe' && def.in); def = defOf(current)) current = def.innerType ?? def.in!;
  return current;
}

/** The member of a union (or the schema itself) of the given zod type. */
function unionMember(node: z.ZodType, type: string): z.ZodType | undefined {
  const inner = unwrap(node);
  const def = defOf(inner);
  if (def.type === type) return inner;
  return def.type === 'union' ? def.options?.map((o) => unionMember(o, type)).find(Boolean) : undefined;
}

/** The schema that checks the value at `path`, stopping at the first union that contains a duration. */
export function schemaAt(schema: z.ZodType, path: readonly PropertyKey[]): z.ZodType | undefined {
  let node: z.ZodType | undefined = schema;
  for (const key of path) {
    if (!node) return undefined;
    const inner = unwrap(node);
    if (inner === durationSchema) return undefined;
    const def = defOf(inner);
    if (def.type === 'object') node = def.shape?.[String(key)];
    else if (def.type === 'array') node = def.element;
    else if (def.type === 'record') node = def.valueType;
    else if (def.type === 'union') node = def.options?.map((o) => schemaAt(o, [key])).find(Boolean);
    else return undefined;
  }
  return node && (unwrap(node) === durationSchema ? durationSchema : unwrap(node));
}
