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

/**
 * Redacts at any depth (an agent's `outputs` may nest as deep as it likes). A value met again on the path from the root
 * (a cycle) is left as it is; objects other than plain ones and arrays are not entered.
 */
function redactValue(value: unknown, secrets: ReadonlySet<string>, path: Set<object>): unknown {
  if (typeof value === 'string') {
    let out = value;
    for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    return out;
  }
  if (value === null || typeof value !== 'object' || path.has(value)) return value;
  if (!Array.isArray(value) && Object.getPrototypeOf(value) !== Object.prototype) return value;
  path.add(value);
  try {
    if (Array.isArray(value)) {
      const items = value.map((item) => redactValue(item, secrets, path));
      return items.some((item, i) => item !== value[i]) ? items : value;
    }
    let changed = false;
    const entries = Object.entries(value).map(([key, item]) => {
      const next = redactValue(item, secrets, path);
      if (next !== item) changed = true;
      return [key, next] as const;
    });
    return changed ? Object.fromEntries(entries) : value;
  } finally {
    path.delete(value);
  }
}
