/**
 * The book of one lease key: who holds it and who waits, first come first served. Pure and deterministic (the lease
 * workflow keeps one in memory and hands its snapshot across continue-as-new), so it is tested without Temporal.
 *
 * Every entry has a time limit unless it is held for a run's life: a holder that is not renewed within its `ttlMs`
 * expires and the key goes to the next waiter; a waiter that stops asking (its process died) drops out the same way.
 *
 * It also remembers when each holder sealed the newest message the workflow took from it (contracts/message-seal.ts),
 * so that a copy of one of its messages, read from history and sent again, is told apart; a holder that left keeps its
 * seal until every message it sealed is too old to be taken (MAX_SEAL_AGE_MS), at most MAX_GONE_SEALS of them.
 */

import type { LeaseAnswer, LeaseBookState, LeaseEntry, LeaseRequest } from '../contracts/lease-messages.js';
import { MAX_SEAL_AGE_MS } from '../contracts/message-seal.js';

/** How long a waiter without a `ttlMs` (a run's life) stays queued after its last request. @unit milliseconds */
export const UNTIMED_WAITER_GRACE_MS = 60_000;

/**
 * The most holders that left the book whose seals it remembers: a bound on the state it carries across
 * continue-as-new (a few hundred bytes each). A key whose holders leave faster (more than one a second for 15 minutes)
 * forgets the oldest first, and a copy of their last messages could take the key for them again until its ttl.
 */
export const MAX_GONE_SEALS = 1_000;

export class LeaseBook {
  private readonly holders: LeaseEntry[];
  private readonly waiters: LeaseEntry[];
  private limit: number;
  /** Holder → when it sealed the newest message taken from it. @unit milliseconds since the epoch */
  private readonly seals: Map<string, number>;

  constructor(state?: LeaseBookState) {
    this.holders = [...(state?.holders ?? [])];
    this.waiters = [...(state?.waiters ?? [])];
    this.limit = state?.limit ?? 1;
    this.seals = new Map((state?.seals ?? []).map((s) => [s.holder, s.sealedAt]));
  }

  /** When `holder` sealed the newest message the book took from it, while the book remembers it. */
  lastSeal(holder: string): number | undefined {
    return this.seals.get(holder);
  }

  /** Remembers that a message `holder` sealed at `sentAt` was taken. */
  takeSeal(holder: string, sentAt: number): void {
    this.seals.set(holder, Math.max(sentAt, this.seals.get(holder) ?? sentAt));
  }

  /**
   * Forgets the seals of holders no longer in the book once their messages are too old to be taken anyway, and the
   * oldest beyond MAX_GONE_SEALS. @returns when the last seal kept can be forgotten, if any is kept
   */
  forgetSeals(now: number): number | undefined {
    const present = new Set([...this.holders, ...this.waiters].map((e) => e.holder));
    const gone = [...this.seals].filter(([holder]) => !present.has(holder)).sort((a, b) => a[1] - b[1]);
    for (const [index, [holder, sealedAt]] of gone.entries()) {
      if (sealedAt + MAX_SEAL_AGE_MS < now || index < gone.length - MAX_GONE_SEALS) this.seals.delete(holder);
    }
    const kept = gone.filter(([holder]) => this.seals.has(holder));
    // A copy is taken while it is at most MAX_SEAL_AGE_MS old: its holder's seal is kept a millisecond longer.
    return kept.length === 0 ? undefined : kept[kept.length - 1]![1] + MAX_SEAL_AGE_MS + 1;
  }

  /**
   * Takes the key or queues for it. Asking again is idempotent: a holder's lease is renewed, a waiter keeps its place
   * (and its deadline moves on, so it is not dropped while it keeps asking).
   */
  request(req: LeaseRequest, now: number, waitMs = 0): LeaseAnswer {
    this.limit = req.limit;
    const held = this.holders.find((h) => h.holder === req.holder);
    if (held) {
      if (held.ttlMs !== undefined) held.expiresAt = now + held.ttlMs;
      return { granted: true, expiresAt: held.expiresAt };
    }
    const waiting = this.waiters.find((w) => w.holder === req.holder);
    const grace = (req.ttlMs ?? UNTIMED_WAITER_GRACE_MS) + waitMs;
    if (waiting) {
      Object.assign(waiting, { limit: req.limit, ttlMs: req.ttlMs, label: req.label ?? waiting.label, run: req.run ?? waiting.run, expiresAt: now + grace });
    } else {
      this.waiters.push({ holder: req.holder, limit: req.limit, ttlMs: req.ttlMs, label: req.label, run: req.run, since: now, expiresAt: now + grace });
    }
    this.promote(now);
    return this.answer(req.holder);
  }

  /** Where a holder stands now: granted, or how many wait before it. */
  answer(holder: string): LeaseAnswer {
    const held = this.holders.find((h) => h.holder === holder);
    if (held) return { granted: true, expiresAt: held.expiresAt };
    const index = this.waiters.findIndex((w) => w.holder === holder);
    return { granted: false, ahead: index < 0 ? this.waiters.length : index, holders: this.holders.length, limit: this.limit };
  }

  holds(holder: string): boolean {
    return this.holders.some((h) => h.holder === holder);
  }

  isWaiting(holder: string): boolean {
    return this.waiters.some((w) => w.holder === holder);
  }

  /** Moves a holder's deadline on. False when it holds nothing (it expired or was released): its lease is lost. */
  renew(holder: string, now: number): { held: boolean; expiresAt?: number } {
    const held = this.holders.find((h) => h.holder === holder);
    if (!held) return { held: false };
    if (held.ttlMs !== undefined) held.expiresAt = now + held.ttlMs;
    return { held: true, expiresAt: held.expiresAt };
  }

  /** Gives the key back, or leaves the queue; the next waiters are granted. True when the holder was in the book. */
  release(holder: string, now: number): boolean {
    const before = this.holders.length + this.waiters.length;
    remove(this.holders, (h) => h.holder === holder);
    remove(this.waiters, (w) => w.holder === holder);
    this.promote(now);
    return this.holders.length + this.waiters.length < before;
  }

  /** Drops holders and waiters past their deadline, then grants the key to the next waiters. Returns who was dropped. */
  expire(now: number): string[] {
    const gone = [...remove(this.holders, (h) => h.expiresAt !== undefined && h.expiresAt <= now), ...remove(this.waiters, (w) => w.expiresAt !== undefined && w.expiresAt <= now)];
    this.promote(now);
    return gone.map((e) => e.holder);
  }

  /** The earliest deadline in the book, when one entry will expire unless renewed. */
  nextDeadline(): number | undefined {
    let next: number | undefined;
    for (const entry of [...this.holders, ...this.waiters]) {
      if (entry.expiresAt !== undefined && (next === undefined || entry.expiresAt < next)) next = entry.expiresAt;
    }
    return next;
  }

  /** The runs that hold the key without a time limit, when somebody waits for it: worth checking that they still run. */
  runsToCheck(): string[] {
    if (this.waiters.length === 0) return [];
    return [...new Set(this.holders.flatMap((h) => (h.ttlMs === undefined && h.run ? [h.run] : [])))];
  }

  /** Takes the key back from runs that closed without giving it back (terminated). Returns the holders dropped. */
  dropRuns(closed: readonly string[], now: number): string[] {
    const gone = remove(this.holders, (h) => h.ttlMs === undefined && h.run !== undefined && closed.includes(h.run));
    this.promote(now);
    return gone.map((h) => h.holder);
  }

  isEmpty(): boolean {
    return this.holders.length === 0 && this.waiters.length === 0;
  }

  /** The whole book, for the next execution; `view()` for whoever asks. */
  snapshot(): LeaseBookState {
    const seals = [...this.seals].map(([holder, sealedAt]) => ({ holder, sealedAt }));
    return { ...this.view(), ...(seals.length > 0 ? { seals } : {}) };
  }

  /** Holders and waiters in order, and the limit: what `limits` shows. */
  view(): Omit<LeaseBookState, 'seals'> {
    return { holders: this.holders.map((h) => ({ ...h })), waiters: this.waiters.map((w) => ({ ...w })), limit: this.limit };
  }

  /** First come first served: the head waiter is granted when the holders are fewer than its limit; nobody jumps it. */
  private promote(now: number): void {
    while (this.waiters.length > 0 && this.holders.length < this.waiters[0].limit) {
      const next = this.waiters.shift()!;
      this.holders.push({ ...next, grantedAt: now, expiresAt: next.ttlMs === undefined ? undefined : now + next.ttlMs });
    }
  }
}

function remove<T>(list: T[], match: (item: T) => boolean): T[] {
  const removed = list.filter(match);
  if (removed.length > 0) list.splice(0, list.length, ...list.filter((item) => !match(item)));
  return removed;
}
