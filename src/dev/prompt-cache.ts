import { createHash } from 'node:crypto';

/*
 * The scripted model server's prompt cache, reporting cache tokens the way the Messages API does: a request's
 * prefix up to each `cache_control` breakpoint (tools, then system, then messages) is written to the cache; a
 * later request whose prefix matches an entry at one of its block boundaries reads it. Tokens are estimated at
 * four characters each, like `count_tokens` here. Enough to measure what caching saves, not a model of billing.
 */

/** Prefixes shorter than this are never cached, as with the API's smallest minimum (Sonnet and Opus). @unit tokens */
export const MIN_CACHEABLE_TOKENS = 1024;
/** An entry lives this long after its last use, like the API's default (5-minute) cache. @unit milliseconds */
export const CACHE_TTL_MS = 5 * 60_000;
/** How many blocks before a breakpoint the API looks back for an entry. */
const LOOKBACK_BLOCKS = 20;

/** What the cache did for one request. @unit tokens */
export interface CacheUsage {
  /** Tokens of the prefix before the last breakpoint that were read from the cache. */
  read: number;
  /** Tokens up to the last breakpoint that were not in the cache and were written to it. */
  write: number;
  /** The request's whole input estimate. */
  total: number;
}

interface Block {
  tokens: number;
  breakpoint: boolean;
  /** Hash of everything up to and including this block. */
  prefixHash: string;
  /** Tokens of everything up to and including this block. */
  prefixTokens: number;
}

/** One server's cache: entries by prefix hash, with their expiry. */
export class ScriptedPromptCache {
  private entries = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  clear(): void {
    this.entries.clear();
  }

  /** Reads and writes the cache for a `/v1/messages` body (nothing for a request that marks no breakpoint). */
  apply(body: Record<string, unknown>): CacheUsage {
    const blocks = blocksOf(body);
    const breakpoints = blocks.flatMap((b, i) => (b.breakpoint ? [i] : []));
    const total = blocks.length > 0 ? blocks[blocks.length - 1].prefixTokens : 0;
    if (breakpoints.length === 0) return { read: 0, write: 0, total };
    const now = this.now();
    for (const [hash, expires] of this.entries) if (expires <= now) this.entries.delete(hash);

    let hit = -1;
    for (const bp of breakpoints) {
      for (let i = bp; i >= Math.max(0, bp - LOOKBACK_BLOCKS); i--) {
        if (this.entries.has(blocks[i].prefixHash)) {
          hit = Math.max(hit, i);
          break;
        }
      }
    }
    const read = hit >= 0 ? blocks[hit].prefixTokens : 0;
    if (hit >= 0) this.entries.set(blocks[hit].prefixHash, now + CACHE_TTL_MS);
    const last = breakpoints[breakpoints.length - 1];
    let write = 0;
    if (blocks[last].prefixTokens >= MIN_CACHEABLE_TOKENS && last > hit) {
      write = blocks[last].prefixTokens - read;
      for (const bp of breakpoints) {
        if (blocks[bp].prefixTokens >= MIN_CACHEABLE_TOKENS) this.entries.set(blocks[bp].prefixHash, now + CACHE_TTL_MS);
      }
    }
    return { read, write, total };
  }
}

/** The request's cacheable blocks in the API's order, each with its running hash and token count. */
function blocksOf(body: Record<string, unknown>): Block[] {
  const raw: unknown[] = [];
  if (Array.isArray(body.tools)) raw.push(...body.tools);
  if (typeof body.system === 'string') raw.push({ type: 'text', text: body.system });
  else if (Array.isArray(body.system)) raw.push(...body.system);
  for (const message of Array.isArray(body.messages) ? body.messages : []) {
    const { role, content } = (message ?? {}) as { role?: unknown; content?: unknown };
    const parts = typeof content === 'string' ? [{ type: 'text', text: content }] : Array.isArray(content) ? content : [];
    // The role is part of what is cached: the same text as user or assistant is a different prefix.
    parts.forEach((part, i) => raw.push(i === 0 ? { role, part } : part));
  }
  const hash = createHash('sha256').update(String(body.model ?? ''));
  let prefixTokens = 0;
  return raw.map((item) => {
    const { cache_control: mark, ...rest } = (unwrap(item) ?? {}) as Record<string, unknown>;
    const text = JSON.stringify(item === unwrap(item) ? rest : { ...(item as object), part: rest });
    hash.update(text);
    prefixTokens += Math.ceil(text.length / 4);
    return { tokens: Math.ceil(text.length / 4), breakpoint: mark !== undefined && mark !== null, prefixHash: hash.copy().digest('hex'), prefixTokens };
  });
}

/** The content block of a raw item (a message's first block comes wrapped with its role). */
function unwrap(item: unknown): unknown {
  return item !== null && typeof item === 'object' && 'part' in item && 'role' in item ? (item as { part: unknown }).part : item;
}
