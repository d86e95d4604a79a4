/**
 * The scripted model server's limit on concurrent requests per API key, like the real API's: a request beyond it is
 * answered 429 `rate_limit_error` with `retry-after`, so the workers' shared rate limits can be tested end to end.
 * Keys are only held in memory, as map keys; the request record never shows them.
 */
export class KeyConcurrency {
  private readonly inFlight = new Map<string, number>();

  constructor(
    /** Requests one key may have open at once. */
    readonly limit: number,
    /** What `retry-after` says to a request refused. @unit seconds */
    readonly retryAfterSeconds: number,
  ) {}

  /** Admits a request of `key`: its release (call once it is answered), or `undefined` when the key is at its limit. */
  enter(key: string): (() => void) | undefined {
    const open = this.inFlight.get(key) ?? 0;
    if (open >= this.limit) return undefined;
    this.inFlight.set(key, open + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const now = (this.inFlight.get(key) ?? 1) - 1;
      if (now === 0) this.inFlight.delete(key);
      else this.inFlight.set(key, now);
    };
  }

  /** The 429 the real API answers past a concurrency limit. */
  refusal(): { status: 429; type: 'rate_limit_error'; message: string; retryAfter: number } {
    return {
      status: 429,
      type: 'rate_limit_error',
      message: `Number of concurrent connections has exceeded your rate limit (${this.limit} per API key on this scripted server). Please try again later.`,
      retryAfter: this.retryAfterSeconds,
    };
  }
}
