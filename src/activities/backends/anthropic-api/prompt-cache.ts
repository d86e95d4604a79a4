import type Anthropic from '@anthropic-ai/sdk';
import type { StagePrompt } from '../../prompt/compose.js';

/*
 * Prompt caching for the API backend. The Messages API caches the prefix of a request up to each block marked
 * with `cache_control` (order: tools, system, messages), for five minutes from its last use. A later request
 * whose prefix matches reads those tokens at a tenth of the input price; writing them costs a quarter more.
 * So the stable, large parts go first and get a breakpoint each, and the conversation's end gets one, so a
 * continuation (answer, rework, contract retry, more after `max_tokens`) reads everything before it.
 */

/** The API refuses a request with more cache breakpoints than this. */
export const MAX_CACHE_BREAKPOINTS = 4;

const EPHEMERAL: Anthropic.CacheControlEphemeral = { type: 'ephemeral' };

/** The system blocks of a stage's first request: context files, then earlier work, then persona and contract. */
export function systemBlocksOf(prompt: StagePrompt): string[] {
  return [...(prompt.context ?? []), prompt.system].filter((text) => text.trim() !== '');
}

/** What the request builder passes on to `messages.stream`. */
export interface CachedRequestParts {
  system?: Anthropic.TextBlockParam[];
  messages: Anthropic.MessageParam[];
}

/**
 * The request's `system` and `messages`, with cache breakpoints when `cache` is on, never more than
 * {@link MAX_CACHE_BREAKPOINTS}. Priority: the end of the conversation (the prefix every continuation
 * re-sends), then each system block (the first one, the pipeline's context files, is shared by every stage
 * of the run), then the end of the previous user message, so a long conversation still finds the entry the
 * previous request wrote. The caller's messages are not changed.
 */
export function withCacheBreakpoints(systemBlocks: string[], messages: Anthropic.MessageParam[], cache: boolean): CachedRequestParts {
  const system = systemBlocks.length > 0 ? systemBlocks.map((text): Anthropic.TextBlockParam => ({ type: 'text', text })) : undefined;
  if (!cache || messages.length === 0) return { system, messages };
  let budget = MAX_CACHE_BREAKPOINTS;
  const marked = [...messages];
  const mark = (index: number): void => {
    marked[index] = markLastBlock(marked[index]);
    budget--;
  };
  mark(marked.length - 1);
  if (system) {
    // With more system blocks than breakpoints left, the first (shared by stages) and the last (the whole system) matter most.
    const chosen = system.length <= budget ? system.map((_, i) => i) : [...system.keys()].slice(0, budget - 1).concat(system.length - 1);
    for (const i of chosen) system[i] = { ...system[i], cache_control: EPHEMERAL };
    budget -= chosen.length;
  }
  const previousUser = findLastIndex(marked, (m, i) => m.role === 'user' && i < marked.length - 1);
  if (budget > 0 && previousUser >= 0) mark(previousUser);
  return { system, messages: marked };
}

/** `message` with `cache_control` on its last content block (a string becomes one text block). */
function markLastBlock(message: Anthropic.MessageParam): Anthropic.MessageParam {
  if (typeof message.content === 'string') {
    return { ...message, content: [{ type: 'text', text: message.content, cache_control: EPHEMERAL }] };
  }
  if (message.content.length === 0) return message;
  const blocks = [...message.content];
  const last = blocks[blocks.length - 1];
  // Thinking blocks cannot carry cache_control; they are cached as part of the prefix anyway.
  if (last.type === 'thinking' || last.type === 'redacted_thinking') return message;
  blocks[blocks.length - 1] = { ...last, cache_control: EPHEMERAL } as Anthropic.ContentBlockParam;
  return { ...message, content: blocks } as Anthropic.MessageParam;
}

function findLastIndex<T>(items: T[], test: (item: T, index: number) => boolean): number {
  for (let i = items.length - 1; i >= 0; i--) if (test(items[i], i)) return i;
  return -1;
}
