/**
 * Secrets the worker knows (API keys and tokens), kept out of everything an activity reports:
 * failure messages and details, stage results, transcripts it writes itself.
 */

const secrets = new Set<string>();

/** Shorter values are not treated as secrets: redacting them would mangle ordinary text. */
const MIN_SECRET_LENGTH = 8;

/** What a secret is replaced with. */
export const REDACTED = '<redacted>';

/** Remembers secrets to redact from then on. Empty and short values are ignored. */
export function registerSecrets(values: readonly (string | undefined)[]): void {
  for (const value of values) {
    if (value && value.length >= MIN_SECRET_LENGTH) secrets.add(value);
  }
}

/**
 * Returns `value` with every registered secret replaced by `<redacted>`: strings, and the strings
 * inside plain objects and arrays (a copy is made only where something changed).
 */
export function redactSecrets<T>(value: T): T {
  if (secrets.size === 0) return value;
  return redact(value, 0) as T;
}

function redact(value: unknown, depth: number): unknown {
  if (typeof value === 'string') {
    let out = value;
    for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    return out;
  }
  if (depth > 20 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    const items = value.map((item) => redact(item, depth + 1));
    return items.some((item, i) => item !== value[i]) ? items : value;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  let changed = false;
  const entries = Object.entries(value).map(([key, item]) => {
    const next = redact(item, depth + 1);
    if (next !== item) changed = true;
    return [key, next] as const;
  });
  return changed ? Object.fromEntries(entries) : value;
}
