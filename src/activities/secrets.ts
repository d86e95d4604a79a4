import { AsyncLocalStorage } from 'node:async_hooks';

/*
 * Secrets the worker knows (API keys and tokens), kept out of everything an activity reports: failure messages and
 * details, stage results, transcripts it writes itself.
 *
 * The worker makes one `SecretRegistry` and hands it to `createActivities`, which runs every activity inside it.
 * The helpers that build failures and results deep inside an activity (`stageFailure` among them, also a backend
 * author's) redact with `redactSecrets`, which finds the registry of the activity it runs in through the async
 * context, the way Temporal's `Context.current()` finds the activity; no secret is held by the module itself.
 */

/** Shorter values are not treated as secrets: redacting them would mangle ordinary text. */
const MIN_SECRET_LENGTH = 8;

/** What a secret is replaced with. */
export const REDACTED = '<redacted>';

/** The registry of the activity running in this async context. */
const current = new AsyncLocalStorage<SecretRegistry>();

/** The secrets of one worker. */
export class SecretRegistry {
  private readonly secrets = new Set<string>();

  constructor(values: readonly (string | undefined)[] = []) {
    this.register(values);
  }

  /** Remembers secrets to redact from then on. Empty and short values are ignored. */
  register(values: readonly (string | undefined)[]): void {
    for (const value of values) {
      if (value && value.length >= MIN_SECRET_LENGTH) this.secrets.add(value);
    }
  }

  /**
   * Returns `value` with every secret replaced by `<redacted>`: strings, and the strings inside plain objects and
   * arrays (a copy is made only where something changed).
   */
  redact<T>(value: T): T {
    if (this.secrets.size === 0) return value;
    return redactValue(value, this.secrets, new Set()) as T;
  }

  /** Every secret registered, for writers that redact a byte stream themselves (transcripts). */
  values(): string[] {
    return [...this.secrets];
  }

  /** Runs `work` with this registry as the one `redactSecrets` uses, in `work` and everything it awaits or starts. */
  run<T>(work: () => T): T {
    return current.run(this, work);
  }
}

/**
 * `value` with the secrets of the worker whose activity is running replaced by `<redacted>` (see
 * {@link SecretRegistry.redact}); unchanged outside an activity.
 */
export function redactSecrets<T>(value: T): T {
  return current.getStore()?.redact(value) ?? value;
}

/** The secrets of the activity running now; undefined outside an activity. */
export function currentSecretValues(): string[] | undefined {
  return current.getStore()?.values();
}

/**
 * The redaction of the activity running now, kept for later: work an activity leaves running after it completed (an
 * agent followed to its exit) still redacts with its worker's secrets, whatever async context it then runs in.
 */
export function currentRedaction(): <T>(value: T) => T {
  const registry = current.getStore();
  return (value) => registry?.redact(value) ?? value;
}

/** JSON's escapes: `\u0067` and the one-letter ones (`\/`, `\"`, `\n`…). */
const JSON_ESCAPE = /\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))/g;
/** Levels of JSON quoted in JSON that are unescaped to look for a secret. */
const MAX_ESCAPE_LEVELS = 4;
const ONE_LETTER: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

function replaceSecrets(text: string, secrets: ReadonlySet<string>): string {
  let out = text;
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  return out;
}

/**
 * `text` with every secret replaced, also one spelled with JSON escapes (`\u0067hp_…`): such text is JSON waiting to
 * be parsed (an agent's report quoted in a summary, a tool's output), and a parser, ours or a reader's, gives the
 * secret back. Where unescaping reveals a secret, the text is kept unescaped, with the secret replaced.
 */
function redactText(text: string, secrets: ReadonlySet<string>): string {
  const out = replaceSecrets(text, secrets);
  // JSON quoted in JSON escapes its escapes again: a few levels, then no reader would go on.
  let current = out;
  for (let level = 0; level < MAX_ESCAPE_LEVELS && current.includes('\\'); level++) {
    const unescaped = current.replace(JSON_ESCAPE, (_, hex: string | undefined, letter: string | undefined) => (hex ? String.fromCharCode(parseInt(hex, 16)) : ONE_LETTER[letter!]));
    if (unescaped === current) break;
    const revealed = replaceSecrets(unescaped, secrets);
    if (revealed !== unescaped) return revealed;
    current = unescaped;
  }
  return out;
}

/**
 * An object's entries with keys and values redacted. Keys matter as much as values: an agent's `outputs` are keyed
 * as it likes, and a report's keys (JSON-unescaped when it was parsed) may hold a secret. Two keys that redact alike
 * stay apart (`<redacted>`, `<redacted> (2)`).
 */
function redactEntries(value: object, secrets: ReadonlySet<string>, path: Set<object>): [entries: [string, unknown][], changed: boolean] {
  const used = new Set<string>();
  let changed = false;
  const entries = Object.entries(value).map(([key, item]): [string, unknown] => {
    let next = redactText(key, secrets);
    for (let n = 2; next !== key && (used.has(next) || Object.hasOwn(value, next)); n++) next = `${redactText(key, secrets)} (${n})`;
    used.add(next);
    const redacted = redactValue(item, secrets, path);
    if (next !== key || redacted !== item) changed = true;
    return [next, redacted];
  });
  return [entries, changed];
}

/**
 * Redacts at any depth (an agent's `outputs` may nest as deep as it likes), keys included. A value met again on the
 * path from the root (a cycle) is left as it is; objects other than plain ones and arrays are not entered.
 */
function redactValue(value: unknown, secrets: ReadonlySet<string>, path: Set<object>): unknown {
  if (typeof value === 'string') return redactText(value, secrets);
  if (value === null || typeof value !== 'object' || path.has(value)) return value;
  if (!Array.isArray(value) && Object.getPrototypeOf(value) !== Object.prototype) return value;
  path.add(value);
  try {
    if (Array.isArray(value)) {
      const items = value.map((item) => redactValue(item, secrets, path));
      return items.some((item, i) => item !== value[i]) ? items : value;
    }
    const [entries, changed] = redactEntries(value, secrets, path);
    return changed ? Object.fromEntries(entries) : value;
  } finally {
    path.delete(value);
  }
}
