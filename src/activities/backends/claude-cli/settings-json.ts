/** Claude Code settings as JSON: an object whose fields are read without trusting their shape. */
export type Json = Record<string, unknown>;

/** The object at `value`, or an empty one when it is none (absent, an array, a scalar). */
export const objectAt = (value: unknown): Json => (value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {});

/** The strings of the array at `value`; none when it is no array. */
export const stringsAt = (value: unknown): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);
