import type { LeaseRequest } from './lease-request.js';

/** What a held lease asks of the client that took it. */
export interface LeaseKeeper {
  /** Moves the holder's deadline on in each book; `held: false` when one of them lost it (expired or released). */
  renewAt(ids: readonly string[], holder: string): Promise<{ held: boolean; expiresAt?: number }>;
  /** Gives the key back in each book. */
  releaseAt(ids: readonly string[], holder: string): Promise<void>;
}

/** A lease held: renew it while the work runs (`keepAlive`), release it when the work ends, on every path. */
export class Lease {
  constructor(
    private readonly keeper: LeaseKeeper,
    readonly request: LeaseRequest,
    /** When it expires unless renewed; undefined for a lease held until released. @unit milliseconds since the epoch */
    public expiresAt: number | undefined,
    /** The books (workflow ids) it is held in: the key's own, and any earlier one still open when it was taken. */
    readonly ids: readonly string[],
  ) {}

  get key(): string {
    return this.request.key;
  }

  async renew(): Promise<boolean> {
    const answer = await this.keeper.renewAt(this.ids, this.request.holder);
    this.expiresAt = answer.expiresAt;
    return answer.held;
  }

  async release(): Promise<void> {
    await this.keeper.releaseAt(this.ids, this.request.holder);
  }

  /**
   * Renews every third of the ttl until the returned function is called; `onLost` hears of a renewal that found the
   * lease gone (the process was stalled past the ttl: its heartbeats stopped too, so Temporal retries the attempt).
   */
  keepAlive(onLost?: (key: string) => void): () => void {
    if (this.request.ttlMs === undefined) return () => undefined;
    const timer = setInterval(() => {
      this.renew().then(
        (held) => (held ? undefined : onLost?.(this.key)),
        () => undefined, // a failed renewal is tried again at the next tick, well within the ttl
      );
    }, Math.max(500, Math.floor(this.request.ttlMs / 3)));
    timer.unref();
    return () => clearInterval(timer);
  }
}
