import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { apiKeyId } from '../../src/activities/api-key/key-id.js';
import { ApiKeyLimiter, type KeySlots, type ThrottledWait } from '../../src/activities/api-key/key-limiter.js';
import type { KeyLimitStore } from '../../src/activities/api-key/key-limit-store.js';
import { apiKeyLimitsFromEnv } from '../../src/activities/api-key/limits-env.js';
import { callWithinLimits } from '../../src/activities/backends/anthropic-api/limited-call.js';
import { throttledNote } from '../../src/cli/run-view.js';
import { KeyConcurrency } from '../../src/dev/key-concurrency.js';
import { MAX_PAUSE_MS, REQUEST_WINDOW_MS } from '../../src/contracts/api-key-limit-messages.js';
import { emptyWindow, extendPause, idleAt, reserveStart } from '../../src/workflows/api-key-window.js';

const NOW = 1_800_000_000_000;

describe('the request window of an API key', () => {
  it('grants requestsPerMinute start times per minute, then the next ones as the oldest leave the window', () => {
    const window = emptyWindow();
    expect([reserveStart(window, NOW, 2), reserveStart(window, NOW, 2)]).toEqual([NOW, NOW]);
    // The third waits until the first has left the window; the fourth may go with it, the fifth a minute later.
    expect(reserveStart(window, NOW + 1_000, 2)).toBe(NOW + REQUEST_WINDOW_MS);
    expect(reserveStart(window, NOW + 1_000, 2)).toBe(NOW + REQUEST_WINDOW_MS);
    expect(reserveStart(window, NOW + 1_000, 2)).toBe(NOW + 2 * REQUEST_WINDOW_MS);
  });

  it('never grants a start inside a pause, nor before an earlier grant (first come, first served)', () => {
    const window = emptyWindow();
    extendPause(window, NOW + 5_000, NOW);
    expect(reserveStart(window, NOW, 100)).toBe(NOW + 5_000);
    expect(reserveStart(window, NOW + 1, 100)).toBe(NOW + 5_000);
    expect(window.starts).toEqual([NOW + 5_000, NOW + 5_000]);
  });

  it('forgets grants that have left the window', () => {
    const window = emptyWindow();
    reserveStart(window, NOW, 1);
    expect(reserveStart(window, NOW + REQUEST_WINDOW_MS + 1, 1)).toBe(NOW + REQUEST_WINDOW_MS + 1);
    expect(window.starts).toEqual([NOW + REQUEST_WINDOW_MS + 1]);
  });

  it('only ever extends a pause, at most MAX_PAUSE_MS ahead', () => {
    const window = emptyWindow();
    expect(extendPause(window, NOW + 10_000, NOW)).toBe(true);
    expect(extendPause(window, NOW + 5_000, NOW)).toBe(false);
    expect(window.pausedUntil).toBe(NOW + 10_000);
    expect(extendPause(window, NOW + 24 * 3_600_000, NOW)).toBe(true);
    expect(window.pausedUntil).toBe(NOW + MAX_PAUSE_MS);
  });

  it('is idle once the pause is over and the last grant has left the window', () => {
    const window = emptyWindow();
    expect(idleAt(window)).toBe(0);
    reserveStart(window, NOW, 5);
    extendPause(window, NOW + 1_000, NOW);
    expect(idleAt(window)).toBe(NOW + REQUEST_WINDOW_MS);
  });
});

/** A key's shared state in memory, with the window arithmetic the workflow uses: another worker is another limiter on it. */
class MemoryStore implements KeyLimitStore {
  readonly window = emptyWindow();
  calls: string[] = [];
  async readPausedUntil(): Promise<number> {
    this.calls.push('read');
    return this.window.pausedUntil;
  }
  async reportPause(until: number): Promise<void> {
    this.calls.push('pause');
    extendPause(this.window, until, Date.now());
  }
  async reserve(perMinute: number): Promise<number> {
    this.calls.push('reserve');
    return reserveStart(this.window, Date.now(), perMinute);
  }
}

/** `limit` slots in memory, recording the most held at once. */
function memorySlots(limit: number): KeySlots & { held: number; most: number } {
  const queue: (() => void)[] = [];
  const slots = {
    held: 0,
    most: 0,
    async acquire(signal: AbortSignal) {
      if (slots.held >= limit) await new Promise<void>((resolve) => queue.push(resolve));
      signal.throwIfAborted();
      slots.held++;
      slots.most = Math.max(slots.most, slots.held);
      return async () => {
        slots.held--;
        queue.shift()?.();
      };
    },
  };
  return slots;
}

const never = new AbortController().signal;

describe('ApiKeyLimiter', () => {
  it('lets a call on a key with no limits and no pause go at once, asking the shared state nothing', async () => {
    const store = new MemoryStore();
    const limiter = new ApiKeyLimiter({ keyId: 'k', limits: {}, store });
    const waits: (ThrottledWait | undefined)[] = [];
    const release = await limiter.acquire(never, (wait) => waits.push(wait));
    await release();
    expect(store.calls).toEqual([]);
    expect(waits).toEqual([]);
  });

  it("waits out its own 429's pause at once, and shares it with the other workers", async () => {
    const store = new MemoryStore();
    const limiter = new ApiKeyLimiter({ keyId: 'k', limits: {}, store });
    limiter.reportRateLimited(150);
    const until = limiter.pauseEnd;
    const waits: (ThrottledWait | undefined)[] = [];
    await limiter.acquire(never, (wait) => waits.push(wait));
    expect(Date.now()).toBeGreaterThanOrEqual(until);
    expect(waits).toEqual([{ apiKey: 'k', reason: 'paused', until }, undefined]);
    expect(store.window.pausedUntil).toBe(until);
  });

  it('reports a pause once, though a timer may fire a millisecond before the clock reaches its end', async () => {
    // Node's timers keep their own clock: about 1 sleep in 150 ended early by Date.now(), and the caller's loop then
    // reported the same pause again (seen as a third entry in the test above on a loaded machine).
    const store = new MemoryStore();
    const limiter = new ApiKeyLimiter({ keyId: 'k', limits: {}, store });
    const repeated: number[] = [];
    for (let i = 0; i < 400; i++) {
      limiter.reportRateLimited(3 + (i % 5));
      const waits: (ThrottledWait | undefined)[] = [];
      await limiter.acquire(never, (wait) => waits.push(wait));
      if (waits.length !== 2) repeated.push(i);
    }
    expect(repeated).toEqual([]);
  });

  it("learns another worker's pause at start, and in the background, more often while an attempt uses the key", async () => {
    const store = new MemoryStore();
    const other = new ApiKeyLimiter({ keyId: 'k', limits: {}, store });
    other.reportRateLimited(100);
    const limiter = new ApiKeyLimiter({ keyId: 'k', limits: {}, store, refreshMs: 20, idleRefreshMs: 60_000 });
    await limiter.start();
    expect(limiter.pauseEnd).toBe(other.pauseEnd);
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Idle, the worker does not read again before idleRefreshMs.
    expect(store.calls.filter((call) => call === 'read')).toHaveLength(1);
    const done = limiter.use();
    other.reportRateLimited(300);
    await expect.poll(() => limiter.pauseEnd, { timeout: 10_000 }).toBe(other.pauseEnd);
    const waits: (ThrottledWait | undefined)[] = [];
    await limiter.acquire(never, (wait) => waits.push(wait));
    expect(waits[0]).toMatchObject({ reason: 'paused', until: other.pauseEnd });
    expect(Date.now()).toBeGreaterThanOrEqual(other.pauseEnd);
    done();
    limiter.stop();
  });

  it('asks the shared window for a start time under requestsPerMinute, and waits for it', async () => {
    const store = new MemoryStore();
    const limiter = new ApiKeyLimiter({ keyId: 'k', limits: { requestsPerMinute: 600 }, store });
    await (await limiter.acquire(never, () => {}))();
    expect(store.calls).toEqual(['reserve']);
    expect(store.window.starts).toHaveLength(1);
  });

  it('holds a slot of concurrentRequests for each call, never more at once, and an agent is given no start time', async () => {
    const store = new MemoryStore();
    const slots = memorySlots(2);
    const limiter = new ApiKeyLimiter({ keyId: 'k', limits: { concurrentRequests: 2, requestsPerMinute: 1_000 }, store, slots });
    const call = async (): Promise<void> => {
      const release = await limiter.acquire(never, () => {});
      await new Promise((resolve) => setTimeout(resolve, 20));
      await release();
    };
    await Promise.all(Array.from({ length: 6 }, call));
    expect(slots.most).toBe(2);
    expect(slots.held).toBe(0);
    const before = store.calls.length;
    await (await limiter.acquire(never, () => {}, { agent: true }))();
    expect(store.calls.length).toBe(before);
  });

  it('stops waiting when the attempt is cancelled, giving its slot back', async () => {
    const slots = memorySlots(1);
    const limiter = new ApiKeyLimiter({ keyId: 'k', limits: { concurrentRequests: 1 }, store: new MemoryStore(), slots });
    limiter.reportRateLimited(60_000);
    const aborter = new AbortController();
    const waiting = limiter.acquire(aborter.signal, () => {});
    await expect.poll(() => slots.held).toBe(1);
    aborter.abort(new Error('cancelled'));
    await expect(waiting).rejects.toThrow();
    expect(slots.held).toBe(0);
  });
});

describe('ApiKeyLimiter when Temporal cannot answer', () => {
  it('lets the call go with a warning rather than fail the stage', async () => {
    const store = new MemoryStore();
    store.reserve = async () => Promise.reject(new Error('connection refused'));
    const warnings: string[] = [];
    const broken: KeySlots = { acquire: async () => Promise.reject(new Error('connection refused')) };
    const limiter = new ApiKeyLimiter({ keyId: 'k', limits: { requestsPerMinute: 10, concurrentRequests: 1 }, store, slots: broken, warn: (m) => warnings.push(m) });
    await (await limiter.acquire(never, () => {}))();
    expect(warnings).toEqual([
      'could not take a slot on api key k, so the call goes on without it: connection refused',
      'could not get a start time on api key k, so the call goes on without it: connection refused',
    ]);
  });
});

function apiError(status: number, headers: Record<string, string>): Error {
  return Anthropic.APIError.generate(status, { type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } }, 'slow down', new Headers(headers));
}

describe('callWithinLimits', () => {
  it('waits out a 429 with retry-after within the attempt, after pausing the key for every worker', async () => {
    const store = new MemoryStore();
    const limiter = new ApiKeyLimiter({ keyId: 'k', limits: {}, store });
    const seen: number[] = [];
    let calls = 0;
    const answer = await callWithinLimits({ limiter, onThrottled: () => {}, onRateLimited: (status) => seen.push(status) }, never, async () => {
      if (++calls === 1) throw apiError(429, { 'retry-after-ms': '100' });
      return 'answer';
    });
    expect(answer).toBe('answer');
    expect(seen).toEqual([429]);
    expect(store.calls).toContain('pause');
    expect(store.window.pausedUntil).toBeGreaterThan(0);
  });

  it('passes on errors that say nothing of when to retry, and a 429 that keeps coming', async () => {
    const limiter = new ApiKeyLimiter({ keyId: 'k', limits: {}, store: new MemoryStore() });
    const limits = { limiter, onThrottled: () => {} };
    await expect(callWithinLimits(limits, never, async () => Promise.reject(apiError(429, {})))).rejects.toMatchObject({ status: 429 });
    await expect(callWithinLimits(limits, never, async () => Promise.reject(apiError(500, { 'retry-after-ms': '1' })))).rejects.toMatchObject({ status: 500 });
    let calls = 0;
    const always = async (): Promise<never> => {
      calls++;
      throw apiError(529, { 'retry-after-ms': '1' });
    };
    await expect(callWithinLimits(limits, never, always)).rejects.toMatchObject({ status: 529 });
    expect(calls).toBe(6);
  });
});

describe('the worker settings of its API key', () => {
  it('reads requestsPerMinute and concurrentRequests, none when unset', () => {
    expect(apiKeyLimitsFromEnv({})).toEqual({ requestsPerMinute: undefined, concurrentRequests: undefined });
    expect(apiKeyLimitsFromEnv({ AGENT_PIPELINE_API_REQUESTS_PER_MINUTE: '50', AGENT_PIPELINE_API_CONCURRENT_REQUESTS: ' 4 ' })).toEqual({ requestsPerMinute: 50, concurrentRequests: 4 });
  });

  it('refuses a value that is not a whole number in range, naming the variable', () => {
    expect(() => apiKeyLimitsFromEnv({ AGENT_PIPELINE_API_CONCURRENT_REQUESTS: 'two' })).toThrow(/AGENT_PIPELINE_API_CONCURRENT_REQUESTS=two is not a whole number from 1/);
    expect(() => apiKeyLimitsFromEnv({ AGENT_PIPELINE_API_REQUESTS_PER_MINUTE: '0' })).toThrow(/AGENT_PIPELINE_API_REQUESTS_PER_MINUTE=0/);
    expect(() => apiKeyLimitsFromEnv({ AGENT_PIPELINE_API_REQUESTS_PER_MINUTE: '5000' })).toThrow(/from 1 to 1000/);
  });
});

describe('what names a key and shows a throttled wait', () => {
  it('names a key by a hash that does not contain it', () => {
    const key = 'sk-ant-api03-secret-value-0123456789';
    expect(apiKeyId(key)).toMatch(/^[0-9a-f]{12}$/);
    expect(apiKeyId(key)).toBe(apiKeyId(key));
    expect(key).not.toContain(apiKeyId(key));
  });

  it('says what a throttled stage waits for', () => {
    const until = Date.UTC(2026, 10, 26, 14, 3, 5);
    expect(throttledNote({ apiKey: '3f2a9c1b0d4e', reason: 'paused', until })).toBe('throttled: api key 3f2a9c1b0d4e (paused after a 429) until 14:03:05 UTC');
    expect(throttledNote({ apiKey: '3f2a9c1b0d4e', reason: 'concurrentRequests', ahead: 3 })).toBe('throttled: api key 3f2a9c1b0d4e (concurrentRequests, 3 ahead)');
  });
});

describe('the scripted server limit on concurrent requests per key', () => {
  it('admits `limit` requests of a key at once, others keys apart, and answers the real 429 beyond', () => {
    const limit = new KeyConcurrency(2, 3);
    const first = limit.enter('a');
    expect(limit.enter('a')).toBeDefined();
    expect(limit.enter('a')).toBeUndefined();
    expect(limit.enter('b')).toBeDefined();
    first!();
    first!();
    expect(limit.enter('a')).toBeDefined();
    expect(limit.enter('a')).toBeUndefined();
    expect(limit.refusal()).toMatchObject({ status: 429, type: 'rate_limit_error', retryAfter: 3 });
  });
});
