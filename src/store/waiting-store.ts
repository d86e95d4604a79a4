import { setTimeout as sleep } from 'node:timers/promises';
import { formatDuration } from '../pipeline/duration.js';
import { isPassingOutage, type DeletePrefixOptions, type ObjectStore, type StoredObject } from './object-store.js';

/*
 * A worker rides out a store outage instead of failing the stage that met it: every operation that fails with an outage
 * that may pass (StoreUnavailableError `passing`: no connection, a timeout, a 5xx, throttling) is tried again, 1 s, 2 s,
 * 4 s … 15 s apart, until it succeeds or `AGENT_PIPELINE_STORE_WAIT` has passed since its first failure. A stage's own
 * `retries` are for its agent, not for the store's restarts: before this, a store down for 40 s used up 1 + 2 + 4 s of
 * them and failed the run. A refusal (credentials, a missing bucket) fails at once: waiting does not change it.
 * The activities heartbeat while they wait (checkpoint/keep-heartbeating.ts), so a waiting worker is not a dead one.
 */

/** The first pause after a failure, and the longest. @unit milliseconds */
const FIRST_PAUSE_MS = 1_000;
const LONGEST_PAUSE_MS = 15_000;

/** What the store says while it waits: the outage's start, and its end. */
export type StoreWaitReport = (message: string) => void;

export class WaitingStore implements ObjectStore {
  readonly description: string;
  /** When the current outage was first met, for one report at its start and one at its end. */
  private outageSince: number | undefined;

  constructor(
    private readonly inner: ObjectStore,
    /** How long one operation waits for the store at most. @unit milliseconds */
    private readonly waitMs: number,
    private readonly report: StoreWaitReport = () => undefined,
  ) {
    this.description = inner.description;
  }

  put(key: string, body: Uint8Array): Promise<void> {
    return this.waiting(() => this.inner.put(key, body));
  }

  putFile(key: string, file: string): Promise<void> {
    return this.waiting(() => this.inner.putFile(key, file));
  }

  get(key: string, maxBytes: number): Promise<Uint8Array | undefined> {
    return this.waiting(() => this.inner.get(key, maxBytes));
  }

  getFile(key: string, file: string, maxBytes: number): Promise<boolean> {
    return this.waiting(() => this.inner.getFile(key, file, maxBytes));
  }

  deletePrefix(prefix: string, options?: DeletePrefixOptions): Promise<number> {
    return this.waiting(() => this.inner.deletePrefix(prefix, options));
  }

  list(prefix: string): AsyncIterable<string> {
    return this.resumed(() => this.inner.list(prefix), (key) => key);
  }

  listModified(prefix: string): AsyncIterable<StoredObject> {
    return this.resumed(() => this.inner.listModified(prefix), (object) => object.key);
  }

  /** A listing cut by an outage starts over once the store is back, yielding only the keys not yielded yet. */
  private async *resumed<T>(listing: () => AsyncIterable<T>, keyOf: (item: T) => string): AsyncIterable<T> {
    const yielded = new Set<string>();
    const deadline = new Deadline(this.waitMs);
    for (;;) {
      try {
        for await (const item of listing()) {
          if (yielded.has(keyOf(item))) continue;
          yielded.add(keyOf(item));
          yield item;
        }
        return this.back();
      } catch (err) {
        await this.pauseOrThrow(err, deadline);
      }
    }
  }

  private async waiting<T>(operation: () => Promise<T>): Promise<T> {
    const deadline = new Deadline(this.waitMs);
    for (;;) {
      try {
        const result = await operation();
        this.back();
        return result;
      } catch (err) {
        await this.pauseOrThrow(err, deadline);
      }
    }
  }

  /** Sleeps before the next try of an outage that may pass; throws anything else, or once the wait is used up. */
  private async pauseOrThrow(err: unknown, deadline: Deadline): Promise<void> {
    if (!isPassingOutage(err)) throw err;
    const pause = deadline.nextPause();
    if (pause === undefined) {
      (err as Error).message += ` (after waiting ${formatDuration(this.waitMs)} for the store: AGENT_PIPELINE_STORE_WAIT)`;
      throw err;
    }
    if (this.outageSince === undefined) {
      this.outageSince = Date.now();
      this.report(`${(err as Error).message}; waiting up to ${formatDuration(this.waitMs)} for the store (AGENT_PIPELINE_STORE_WAIT)`);
    }
    await sleep(pause);
  }

  private back(): void {
    if (this.outageSince === undefined) return;
    this.report(`the object store ${this.description} answers again, after ${formatDuration(Date.now() - this.outageSince)}`);
    this.outageSince = undefined;
  }
}

/** One operation's wait, from its first failure (a long upload does not shorten it): exponential pauses, none past its end. */
class Deadline {
  private end: number | undefined;
  private pauseMs = FIRST_PAUSE_MS;

  constructor(private readonly waitMs: number) {}

  /** The pause before the next try, or undefined when the wait is over. @unit milliseconds */
  nextPause(): number | undefined {
    this.end ??= Date.now() + this.waitMs;
    const left = this.end - Date.now();
    if (left <= 0) return undefined;
    const pause = Math.min(this.pauseMs, left);
    this.pauseMs = Math.min(this.pauseMs * 2, LONGEST_PAUSE_MS);
    return pause;
  }
}
