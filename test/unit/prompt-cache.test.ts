import type Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { MAX_CACHE_BREAKPOINTS, systemBlocksOf, withCacheBreakpoints } from '../../src/activities/backends/anthropic-api/prompt-cache.js';
import { CACHE_TTL_MS, ScriptedPromptCache } from '../../src/dev/prompt-cache.js';

const count = (value: unknown): number => (JSON.stringify(value).match(/cache_control/g) ?? []).length;
const long = (word: string): string => `${word} `.repeat(2_000);

describe('the cache breakpoint builder', () => {
  it('puts context files and earlier work ahead of the persona, leaving out empty parts', () => {
    expect(systemBlocksOf({ system: 'persona', user: 'task', context: ['## Project context', '## Work'] })).toEqual(['## Project context', '## Work', 'persona']);
    expect(systemBlocksOf({ system: '', user: 'task' })).toEqual([]);
  });

  it('marks every system block and the end of the conversation, without touching the caller\'s messages', () => {
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'first' }];
    const { system, messages: sent } = withCacheBreakpoints(['context', 'persona'], messages, true);
    expect(system?.map((b) => b.cache_control)).toEqual([{ type: 'ephemeral' }, { type: 'ephemeral' }]);
    expect(sent[0]).toEqual({ role: 'user', content: [{ type: 'text', text: 'first', cache_control: { type: 'ephemeral' } }] });
    expect(messages[0].content).toBe('first');
  });

  it('never uses more than four breakpoints, keeping the first system block, the last and the conversation end', () => {
    const conversation: Anthropic.MessageParam[] = [
      { role: 'user', content: 'task' },
      { role: 'assistant', content: 'answer' },
      { role: 'user', content: [{ type: 'text', text: 'more' }, { type: 'text', text: 'please' }] },
    ];
    const five = withCacheBreakpoints(['a', 'b', 'c', 'd', 'e'], conversation, true);
    expect(count(five)).toBe(MAX_CACHE_BREAKPOINTS);
    expect(five.system?.map((b) => b.cache_control !== undefined)).toEqual([true, true, false, false, true]);
    // A short system leaves a breakpoint for the previous user message, where the last request's entry ends.
    const short = withCacheBreakpoints(['persona'], conversation, true);
    expect(count(short)).toBe(3);
    expect(JSON.stringify(short.messages[0])).toContain('cache_control');
    expect(JSON.stringify(short.messages[2].content)).toBe(JSON.stringify([{ type: 'text', text: 'more' }, { type: 'text', text: 'please', cache_control: { type: 'ephemeral' } }]));
  });

  it('marks nothing when caching is off', () => {
    const parts = withCacheBreakpoints(['persona'], [{ role: 'user', content: 'task' }], false);
    expect(count(parts)).toBe(0);
    expect(parts.system).toEqual([{ type: 'text', text: 'persona' }]);
  });
});

describe('the scripted model server\'s prompt cache', () => {
  const body = (system: string, user: string, mark = true) => ({
    model: 'm',
    system: [{ type: 'text', text: system, ...(mark ? { cache_control: { type: 'ephemeral' } } : {}) }],
    messages: [{ role: 'user', content: user }],
  });

  it('writes on the first request and reads the matching prefix on the next; a changed prefix misses', () => {
    const cache = new ScriptedPromptCache();
    const first = cache.apply(body(long('context'), 'one'))!;
    expect(first.read).toBe(0);
    expect(first.write).toBeGreaterThan(2_000);
    const second = cache.apply(body(long('context'), 'two'))!;
    expect(second).toMatchObject({ read: first.write, write: 0 });
    expect(cache.apply(body(long('changed'), 'two'))).toMatchObject({ read: 0, write: first.write });
  });

  it('caches nothing below the minimum, nothing without a breakpoint, and forgets entries after the TTL', () => {
    let now = 0;
    const cache = new ScriptedPromptCache(() => now);
    expect(cache.apply(body('short', 'x'))).toMatchObject({ read: 0, write: 0 });
    expect(cache.apply(body(long('context'), 'x', false))).toMatchObject({ read: 0, write: 0 });
    cache.apply(body(long('context'), 'x'));
    now += CACHE_TTL_MS + 1;
    expect(cache.apply(body(long('context'), 'x'))!.read).toBe(0);
  });
});
