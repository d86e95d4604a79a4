import { setTimeout as sleep } from 'node:timers/promises';
import { MAX_PAUSE_MS } from '../../contracts/api-key-limit-messages.js';
import type { KeyLimitStore } from './key-limit-store.js';

/** A worker's optional limits on its API key (`AGENT_PIPELINE_API_REQUESTS_PER_MINUTE`, `AGENT_PIPELINE_API_CONCURRENT_REQUESTS`). */
export interface ApiKeyLimits {
  /** Model calls started per minute on the key, by every worker together. */
  requestsPerMinute?: number;
  /** Model calls (API stages) or agents (CLI stages) at once on the key, by every worker together. */
  concurrentRequests?: number;
}

/** Why a model call is waiting, as the attempt reports it in its heartbeat and `status` shows it. */
export interface ThrottledWait {
  /** The key's id (a hash, see key-id.ts). */
  apiKey: string;
  /** `paused`: a 429/529 with `retry-after`; the others: the worker's limits. */
  reason: 'paused' | 'requestsPerMinute' | 'concurrentRequests';
  /** When the wait ends, where it is known. @unit milliseconds since the epoch */
  until?: number;
  /** Calls queued before this one for a slot of `concurrentRequests`, on every worker. */
  ahead?: number;
}

/** Slots of `concurrentRequests` shared by every worker on the key: take one, and give it back with the function returned. */
export interface KeySlots {
  acquire(signal: AbortSignal, options?: { label?: string; onQueued?: (ahead: number) => void }): Promise<() => Promise<void>>;
}

export interface ApiKeyLimiterOptions {
  keyId: string;
  limits: ApiKeyLimits;
  store: KeyLimitStore;
  /** Required when `limits.concurrentRequests` is set. */
  slots?: KeySlots;
  /** How often the shared pause is read while attempts use the key. @unit milliseconds @default 1000 */
  refreshMs?: number;
  /** How often it is read while none does. @unit milliseconds @default 5000 */
  idleRefreshMs?: number;
  /** Where failures to reach the shared state go; they never fail a call (the API's own 429s still protect it). */
  warn?: (message: string) => void;
}

export interface AcquireOptions {
  /** What `agent-pipeline limits` shows for the slot's holder. */
  label?: string;
  /** For a CLI agent rather than one model call: `requestsPerMinute` does not apply. */
  agent?: boolean;
}

/** What a waiting call is told, for its heartbeat; `undefined` once it may go. */
export type OnThrottled = (wait: ThrottledWait | undefined) => void;

/** How long taking a slot may take before the call reports that it queues for one. @unit milliseconds */
const SLOT_QUEUED_AFTER_MS = 500;

const NO_RELEASE = async (): Promise<void> => {};

/**
 * One worker's side of an API key's shared limits. It keeps a local view of the key's pause, refreshed in the
 * background (see `start`), so that a call on a key with no limits and no recent 429 starts at once,
 * with no round trip; a pause this worker reports applies here at once and reaches the others through Temporal.
 */
export class ApiKeyLimiter {
  readonly keyId: string;
  private pausedUntil = 0;
  private users = 0;
  private lastRead = 0;
  private reading = false;
  private refresher?: NodeJS.Timeout;

  constructor(private readonly options: ApiKeyLimiterOptions) {
    this.keyId = options.keyId;
    if (options.limits.concurrentRequests !== undefined && !options.slots) throw new Error('concurrentRequests needs the key slots');
  }

  get limits(): ApiKeyLimits {
    return this.options.limits;
  }

  /** The end of the pause in this worker's view. @unit milliseconds since the epoch (0: none known) */
  get pauseEnd(): number {
    return this.pausedUntil;
  }

  /**
   * Reads the key's shared pause now, then keeps reading it in the background until `stop()`: every `refreshMs` while
   * attempts use the key, every `idleRefreshMs` otherwise, as long as `alive()` (the worker has not stopped). The
   * worker awaits the first read once, when it starts.
   */
  async start(alive: () => boolean = () => true): Promise<void> {
    await this.refresh();
    clearInterval(this.refresher);
    this.refresher = setInterval(() => {
      if (!alive()) return this.stop();
      const every = this.users > 0 ? 0 : (this.options.idleRefreshMs ?? 5_000);
      if (Date.now() - this.lastRead >= every) void this.refresh();
    }, this.options.refreshMs ?? 1_000);
    this.refresher.unref();
  }

  /** An attempt uses the key until the function returned is called: meanwhile the shared pause is read more often. */
  use(): () => void {
    this.users++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.users--;
    };
  }

  /** Reads the shared pause into the local view (a pause only grows, so the later of both wins). */
  async refresh(): Promise<void> {
    // A slow server must not pile reads up: the next tick reads again once this one is answered.
    if (this.reading) return;
    this.reading = true;
    this.lastRead = Date.now();
    try {
      this.pausedUntil = Math.max(this.pausedUntil, await this.options.store.readPausedUntil());
    } catch (err) {
      this.options.warn?.(`could not read the shared limits of api key ${this.keyId}: ${(err as Error).message}`);
    } finally {
      this.reading = false;
    }
  }

  /** A 429/529 with `retry-after`: new calls wait it out here at once, and on the other workers once they read it. */
  reportRateLimited(retryAfterMs: number): void {
    // Capped here as in the key's workflow, so a wrong header cannot stop this worker for longer than the others.
    const until = Date.now() + Math.min(retryAfterMs, MAX_PAUSE_MS);
    if (until <= this.pausedUntil) return;
    this.pausedUntil = until;
    this.options.store.reportPause(until).catch((err: unknown) => this.options.warn?.(`could not share the pause of api key ${this.keyId}: ${(err as Error).message}`));
  }

  /**
   * Waits until a new model call may start: a slot of `concurrentRequests`, a start time under `requestsPerMinute`, the
   * end of the key's pause. Without limits or pause it returns at once. Resolves to the release of the slot (call it
   * when the call or the agent has ended, on every path).
   * @throws the abort reason when `signal` aborts while waiting
   */
  async acquire(signal: AbortSignal, onThrottled: OnThrottled, options: AcquireOptions = {}): Promise<() => Promise<void>> {
    const { concurrentRequests } = this.options.limits;
    // An agent makes its many calls itself: it takes a slot and waits out a pause, but is given no start time.
    const requestsPerMinute = options.agent ? undefined : this.options.limits.requestsPerMinute;
    const { label } = options;
    if (requestsPerMinute === undefined && concurrentRequests === undefined && this.pausedUntil <= Date.now()) return NO_RELEASE;
    let release = NO_RELEASE;
    try {
      if (concurrentRequests !== undefined) {
        // A free slot is taken in one round trip; only a call that has to queue for one says so.
        const queued = setTimeout(() => onThrottled({ apiKey: this.keyId, reason: 'concurrentRequests' }), SLOT_QUEUED_AFTER_MS);
        const onQueued = (ahead: number): void => onThrottled({ apiKey: this.keyId, reason: 'concurrentRequests', ahead });
        try {
          release = (await this.shared(signal, 'take a slot', () => this.options.slots!.acquire(signal, { label, onQueued }))) ?? NO_RELEASE;
        } finally {
          clearTimeout(queued);
        }
      }
      const startAt = requestsPerMinute === undefined ? undefined : await this.shared(signal, 'get a start time', () => this.options.store.reserve(requestsPerMinute));
      if (startAt !== undefined) await this.waitUntil(startAt, 'requestsPerMinute', signal, onThrottled);
      // A pause may have begun meanwhile; the slot is kept, as no call on the key may start before the pause ends anyway.
      while (this.pausedUntil > Date.now()) await this.waitUntil(this.pausedUntil, 'paused', signal, onThrottled);
    } catch (err) {
      await release();
      throw err;
    } finally {
      onThrottled(undefined);
    }
    return release;
  }

  /**
   * A step on the key's shared state. When Temporal cannot answer it the call goes on without it, with a warning: the
   * API's own 429s still protect the key, and a stage must not fail for its limiter.
   * @throws the abort reason when the attempt is cancelled
   */
  private async shared<T>(signal: AbortSignal, what: string, step: () => Promise<T>): Promise<T | undefined> {
    try {
      return await step();
    } catch (err) {
      signal.throwIfAborted();
      this.options.warn?.(`could not ${what} on api key ${this.keyId}, so the call goes on without it: ${(err as Error).message}`);
      return undefined;
    }
  }

  private async waitUntil(until: number, reason: ThrottledWait['reason'], signal: AbortSignal, onThrottled: OnThrottled): Promise<void> {
    if (until <= Date.now()) return;
    onThrottled({ apiKey: this.keyId, reason, until });
    // A timer may fire a millisecond before the wall clock gets there (Node's timers keep their own clock): sleep the
    // rest, rather than have the caller's loop report the same wait again.
    for (let ms = until - Date.now(); ms > 0; ms = until - Date.now()) await sleep(ms, undefined, { signal });
  }

  /** Stops the background reads (the worker is stopping). */
  stop(): void {
    clearInterval(this.refresher);
  }
}
