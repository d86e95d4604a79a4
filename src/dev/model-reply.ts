import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { CacheUsage } from './prompt-cache.js';
import type { Turn } from './scenario.js';
import { pause, startEventStream, writeEvent, writeWithBackpressure } from './sse.js';

/*
 * Turns a scripted turn into a Messages API reply, streamed (SSE) or as one JSON body.
 * Text is produced chunk by chunk from `text` × `repeat`, so a 200 MB reply is never held in memory.
 */

/** Chunk size used for `repeat` text when `chunks` is not given. @unit UTF-16 code units */
const DEFAULT_REPEAT_CHUNK = 64 * 1024;
/** No text delta is larger than this, whatever `chunks` says. @unit UTF-16 code units */
const MAX_CHUNK = 1024 * 1024;
const DEFAULT_INPUT_TOKENS = 100;

type ReplyBlock =
  | { type: 'text'; text: string; repeat: number }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

/** A reply ready to send: ids are fixed, token counts decided. */
export interface ReplyPlan {
  id: string;
  model: string;
  blocks: ReplyBlock[];
  stopReason: string;
  usage: { input_tokens: number; output_tokens: number; cache_creation_input_tokens: number; cache_read_input_tokens: number };
}

/** Pacing of a reply, from the turn. All @unit milliseconds. */
interface ReplyTiming {
  chunks?: number;
  chunkDelayMs: number;
  stallMs: number;
}

const ID_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Makes a unique id in the API's style: `msg_01…`, `toolu_01…`, `req_01…` plus 22 base62 characters. */
export function makeId(prefix: string): string {
  const chars = Array.from(randomBytes(22), (byte) => ID_ALPHABET[byte % ID_ALPHABET.length]);
  return `${prefix}_01${chars.join('')}`;
}

/**
 * Decides the blocks, ids, stop reason and usage of the reply to `turn`. With `cache` (what the scripted prompt
 * cache did for the request), uncached input is the request's estimate less what was read or written; a turn's
 * scripted usage still wins field by field.
 */
export function planReply(turn: Turn, model: string, cache?: CacheUsage): ReplyPlan {
  const blocks: ReplyBlock[] = [];
  if (turn.text !== undefined) blocks.push({ type: 'text', text: turn.text, repeat: turn.repeat ?? 1 });
  for (const call of turn.tools ?? (turn.tool ? [turn.tool] : [])) {
    blocks.push({ type: 'tool_use', id: call.id ?? makeId('toolu'), name: call.name, input: call.input });
  }
  const outputChars = blocks.reduce(
    (sum, b) => sum + (b.type === 'text' ? b.text.length * b.repeat : JSON.stringify(b.input).length + b.name.length),
    0,
  );
  const hasTool = blocks.some((b) => b.type === 'tool_use');
  // With the scripted prompt cache on, input is estimated from the request, so cached and uncached runs compare.
  const cached = cache !== undefined;
  return {
    id: makeId('msg'),
    model,
    blocks,
    stopReason: turn.stopReason ?? (hasTool ? 'tool_use' : 'end_turn'),
    usage: {
      input_tokens: turn.usage?.input_tokens ?? (cached ? Math.max(1, cache!.total - cache!.read - cache!.write) : DEFAULT_INPUT_TOKENS),
      output_tokens: turn.usage?.output_tokens ?? Math.max(1, Math.ceil(outputChars / 4)),
      cache_creation_input_tokens: turn.usage?.cache_creation_input_tokens ?? cache?.write ?? 0,
      cache_read_input_tokens: turn.usage?.cache_read_input_tokens ?? cache?.read ?? 0,
    },
  };
}

/** The slice [start, end) of `text` repeated forever, built without materialising the whole. */
function sliceRepeated(text: string, start: number, end: number): string {
  const len = text.length;
  let out = '';
  let pos = start;
  const offset = pos % len;
  if (offset !== 0) {
    const take = Math.min(len - offset, end - pos);
    out += text.slice(offset, offset + take);
    pos += take;
  }
  const whole = Math.floor((end - pos) / len);
  if (whole > 0) {
    out += text.repeat(whole);
    pos += whole * len;
  }
  if (pos < end) out += text.slice(0, end - pos);
  return out;
}

/** Yields `text` × `repeat` in about `chunks` pieces, never splitting a surrogate pair. */
export function* textChunks(text: string, repeat: number, chunks: number | undefined): Generator<string> {
  const total = text.length * repeat;
  if (total === 0) return;
  const wanted = chunks ?? (repeat > 1 ? Math.ceil(total / DEFAULT_REPEAT_CHUNK) : 1);
  const count = Math.min(total, Math.max(wanted, Math.ceil(total / MAX_CHUNK)));
  let start = 0;
  for (let i = 1; i <= count; i++) {
    let end = i === count ? total : Math.floor((i * total) / count);
    // A low surrogate at the cut would leave half a character in each chunk.
    const code = text.charCodeAt(end % text.length);
    if (end < total && code >= 0xdc00 && code <= 0xdfff) end += 1;
    if (end <= start) continue;
    yield sliceRepeated(text, start, end);
    start = end;
  }
}

/** Splits tool input JSON in two deltas, as the API streams it in pieces. */
function jsonPieces(input: Record<string, unknown>): string[] {
  const json = JSON.stringify(input);
  if (json.length < 16) return [json];
  const mid = Math.floor(json.length / 2);
  return [json.slice(0, mid), json.slice(mid)];
}

function usageBody(plan: ReplyPlan): Record<string, unknown> {
  return { ...plan.usage, service_tier: 'standard' };
}

/**
 * Streams `plan` as server-sent events: message_start, ping, each content block, message_delta, message_stop.
 * @throws ClientGoneError when the client disconnects midway
 */
export async function streamReply(
  res: ServerResponse,
  plan: ReplyPlan,
  timing: ReplyTiming,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<void> {
  startEventStream(res, headers);
  await writeEvent(res, 'message_start', {
    message: {
      id: plan.id, type: 'message', role: 'assistant', model: plan.model, content: [],
      stop_reason: null, stop_sequence: null, usage: { ...usageBody(plan), output_tokens: 1 },
    },
  });
  await pause(timing.stallMs, signal);
  await writeEvent(res, 'ping', {});
  for (const [index, block] of plan.blocks.entries()) {
    if (block.type === 'text') {
      await writeEvent(res, 'content_block_start', { index, content_block: { type: 'text', text: '' } });
      let first = true;
      for (const chunk of textChunks(block.text, block.repeat, timing.chunks)) {
        if (!first) await pause(timing.chunkDelayMs, signal);
        first = false;
        await writeEvent(res, 'content_block_delta', { index, delta: { type: 'text_delta', text: chunk } });
      }
    } else {
      await writeEvent(res, 'content_block_start', {
        index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
      });
      for (const piece of jsonPieces(block.input)) {
        await writeEvent(res, 'content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } });
      }
    }
    await writeEvent(res, 'content_block_stop', { index });
  }
  await writeEvent(res, 'message_delta', {
    delta: { stop_reason: plan.stopReason, stop_sequence: null },
    usage: usageBody(plan),
  });
  await writeEvent(res, 'message_stop', {});
  res.end();
}

/**
 * Sends `plan` as one Message JSON body. The body is still written in pieces, text escaped
 * chunk by chunk, so huge replies stay out of memory.
 * @throws ClientGoneError when the client disconnects midway
 */
export async function sendReplyJson(
  res: ServerResponse,
  plan: ReplyPlan,
  timing: ReplyTiming,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<void> {
  res.writeHead(200, { ...headers, 'content-type': 'application/json' });
  res.flushHeaders();
  const head = { id: plan.id, type: 'message', role: 'assistant', model: plan.model };
  await writeWithBackpressure(res, `${JSON.stringify(head).slice(0, -1)},"content":[`);
  await pause(timing.stallMs, signal);
  for (const [index, block] of plan.blocks.entries()) {
    if (index > 0) await writeWithBackpressure(res, ',');
    if (block.type === 'tool_use') {
      await writeWithBackpressure(res, JSON.stringify(block));
      continue;
    }
    await writeWithBackpressure(res, '{"type":"text","text":"');
    let first = true;
    for (const chunk of textChunks(block.text, block.repeat, timing.chunks)) {
      if (!first) await pause(timing.chunkDelayMs, signal);
      first = false;
      // JSON.stringify escapes the chunk; drop its quotes to splice it into the open string.
      await writeWithBackpressure(res, JSON.stringify(chunk).slice(1, -1));
    }
    await writeWithBackpressure(res, '","citations":null}');
  }
  const tail = {
    stop_reason: plan.stopReason, stop_sequence: null, stop_details: null, container: null, usage: usageBody(plan),
  };
  await writeWithBackpressure(res, `],${JSON.stringify(tail).slice(1)}`);
  res.end();
}
