/*
 * One call at a time per key in this process (a folder's git operations, a run's checkpoints, a restore's turn before
 * it takes the lock other processes share): each call waits for the one before it, however that one ended.
 */

/** The calls on each key, in order: a promise that resolves once the last of them is done. */
const lines = new Map<string, Promise<void>>();

export interface KeyedLockOptions {
  /** Stops the wait for the calls before: the call rejects with the signal's reason, and leaves its place in line. */
  signal?: AbortSignal;
  /** Told when the call has to wait for another first. */
  onQueued?: () => void;
}

/** Runs `fn` once every earlier call on `key` in this process is done. @throws the signal's reason when cancelled while waiting */
export async function withLock<T>(key: string, fn: () => Promise<T>, options: KeyedLockOptions = {}): Promise<T> {
  const before = lines.get(key);
  let end!: () => void;
  const mine = new Promise<void>((resolve) => (end = resolve));
  // The next call waits for this one and for those before it, even when this one stops waiting.
  const line = before ? before.then(() => mine) : mine;
  lines.set(key, line);
  try {
    if (before) {
      options.onQueued?.();
      await untilDone(before, options.signal);
    } else {
      // Never within the caller's own synchronous code, even with the key free: a caller may set up what `fn` reads
      // after the call, as with a `then`.
      await undefined;
    }
    return await fn();
  } finally {
    end();
    if (lines.get(key) === line) lines.delete(key);
  }
}

/** Resolves when `turn` does; rejects with the signal's reason when it is aborted first. */
function untilDone(turn: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return turn;
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    void turn.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
