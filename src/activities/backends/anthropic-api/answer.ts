import type Anthropic from '@anthropic-ai/sdk';
import type { TokenUsage } from '../../../pipeline/stage-result.js';
import type { ApiTranscript } from './transcript.js';
import { withCacheBreakpoints } from './prompt-cache.js';
import { callWithinLimits, type CallLimits } from './limited-call.js';

/*
 * One answer of the Messages API backend, continued while it is cut off. An answer that stops at `max_tokens`
 * has usually lost its end, the report block included; asking only for the report would leave the deliverable
 * cut short. So the model first gets to finish its answer in the same conversation, each continuation appended
 * to the text, and only an answer still cut off after `maxContinuations` is handed on as it is.
 */

/** What the model is told when its answer was cut off at the length limit. */
export const CONTINUE_MESSAGE =
  'Your answer was cut off at the length limit. Continue exactly where it stopped, without repeating anything ' +
  'and without any preamble; end with the report block as instructed.';

/** The same, for a stage whose answer is the deliverable itself (`contract: none`): there is no report to end with. */
export const CONTINUE_FREE_MESSAGE =
  'Your answer was cut off at the length limit. Continue exactly where it stopped, without repeating anything ' +
  'and without any preamble.';

export interface AnswerRequest {
  client: Anthropic;
  model: string;
  /** Length limit of each call. @unit tokens */
  maxTokens: number;
  /** The system prompt as blocks (see prompt-cache.ts); the same blocks on every call of a conversation. */
  systemBlocks: string[];
  /** Mark cache breakpoints (`cache_control`) on the system blocks and the conversation. */
  cache: boolean;
  /** The stage's output contract: with `none` a continuation is not reminded of a report block. */
  contract?: 'json' | 'none';
  /** The conversation so far, ending with the user message to answer. */
  messages: Anthropic.MessageParam[];
  /** How many times an answer cut off at `maxTokens` is continued. */
  maxContinuations: number;
  signal: AbortSignal;
  transcript: ApiTranscript;
  /** The conversation's id, as the transcript's `session_id`. */
  sessionId: string;
  /** The API key's shared limits each call waits for (limited-call.ts); none when the worker has no limiter. */
  limits?: CallLimits;
  /** Called on every streamed event with the tokens of the whole answer so far (estimated while streaming). */
  onProgress(usage: TokenUsage): void;
}

export interface Answer {
  /** The model's answer: every call's text, joined. */
  text: string;
  /** The conversation with the answer in it: each call's reply, and the request to continue between them. */
  messages: Anthropic.MessageParam[];
  /** Tokens of every call together. */
  usage: TokenUsage;
  /** The last call's stop reason; `max_tokens` when the answer is still cut off. */
  stopReason: Anthropic.Message['stop_reason'];
  /** Messages API calls made (1 + continuations). */
  calls: number;
}

/**
 * Streams the answer to `request.messages`, continuing it while it stops at `max_tokens`, at most
 * `maxContinuations` times. Each call's reply is written to the transcript as an `assistant` event, each request
 * to continue as a `user` event.
 * @throws whatever the SDK throws (the caller classifies it), or the abort reason when cancelled
 */
export async function streamAnswer(request: AnswerRequest): Promise<Answer> {
  const messages = [...request.messages];
  const usage: Required<TokenUsage> = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
  const continueMessage = request.contract === 'none' ? CONTINUE_FREE_MESSAGE : CONTINUE_MESSAGE;
  let text = '';
  for (let call = 1; ; call++) {
    const message = await callWithinLimits(request.limits, request.signal, () => streamOnce(request, messages, usage));
    const part = message.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
    addUsage(usage, usageOf(message.usage));
    text += part;
    request.transcript.write({
      type: 'assistant',
      session_id: request.sessionId,
      message: { model: message.model, role: 'assistant', content: message.content, stop_reason: message.stop_reason, usage: message.usage },
    });
    // The API refuses an empty assistant turn, and an empty cut-off reply would not get any further anyway.
    if (part !== '') messages.push({ role: 'assistant', content: part });
    const continueIt = message.stop_reason === 'max_tokens' && part !== '' && call <= request.maxContinuations;
    if (!continueIt) return { text, messages, usage: { ...usage }, stopReason: message.stop_reason, calls: call };
    messages.push({ role: 'user', content: continueMessage });
    request.transcript.write({ type: 'user', session_id: request.sessionId, message: { role: 'user', content: continueMessage }, continuation: call });
  }
}

/** One streamed call; progress counts the tokens of the calls before it. */
async function streamOnce(request: AnswerRequest, messages: Anthropic.MessageParam[], before: Required<TokenUsage>): Promise<Anthropic.Message> {
  let current: Required<TokenUsage> = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
  let streamedChars = 0;
  const stream = request.client.messages.stream(
    { model: request.model, max_tokens: request.maxTokens, ...withCacheBreakpoints(request.systemBlocks, [...messages], request.cache) },
    { signal: request.signal },
  );
  stream.on('streamEvent', (event) => {
    if (event.type === 'message_start') current = usageOf(event.message.usage);
    else if (event.type === 'message_delta') current.outputTokens = event.usage.output_tokens;
    else if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') {
      request.transcript.text(event.delta.text);
      streamedChars += event.delta.text.length;
    }
    // Output tokens are only counted at the end of the stream; until then, estimate them from the text.
    const soFar = { ...before };
    addUsage(soFar, { ...current, outputTokens: Math.max(current.outputTokens, Math.ceil(streamedChars / 4)) });
    request.onProgress(soFar);
  });
  return stream.finalMessage();
}

/** The API's usage in our terms: full-price input, output, and the prompt cache's reads and writes apart. */
function usageOf(usage: Anthropic.Usage): Required<TokenUsage> {
  return {
    inputTokens: usage.input_tokens,
    outputTokens: usage.output_tokens,
    cacheReadTokens: usage.cache_read_input_tokens ?? 0,
    cacheWriteTokens: usage.cache_creation_input_tokens ?? 0,
  };
}

function addUsage(total: Required<TokenUsage>, more: Required<TokenUsage>): void {
  total.inputTokens += more.inputTokens;
  total.outputTokens += more.outputTokens;
  total.cacheReadTokens += more.cacheReadTokens;
  total.cacheWriteTokens += more.cacheWriteTokens;
}
