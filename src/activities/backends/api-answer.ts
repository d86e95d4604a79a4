import type Anthropic from '@anthropic-ai/sdk';
import type { TokenUsage } from '../../pipeline/stage-result.js';
import type { ApiTranscript } from './api-transcript.js';

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

export interface AnswerRequest {
  client: Anthropic;
  model: string;
  /** Length limit of each call. @unit tokens */
  maxTokens: number;
  system?: string;
  /** The conversation so far, ending with the user message to answer. */
  messages: Anthropic.MessageParam[];
  /** How many times an answer cut off at `maxTokens` is continued. */
  maxContinuations: number;
  signal: AbortSignal;
  transcript: ApiTranscript;
  /** The conversation's id, as the transcript's `session_id`. */
  sessionId: string;
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
  const usage: TokenUsage = { inputTokens: 0, outputTokens: 0 };
  let text = '';
  for (let call = 1; ; call++) {
    const message = await streamOnce(request, messages, usage);
    const part = message.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
    usage.inputTokens += message.usage.input_tokens;
    usage.outputTokens += message.usage.output_tokens;
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
    messages.push({ role: 'user', content: CONTINUE_MESSAGE });
    request.transcript.write({ type: 'user', session_id: request.sessionId, message: { role: 'user', content: CONTINUE_MESSAGE }, continuation: call });
  }
}

/** One streamed call; progress counts the tokens of the calls before it. */
async function streamOnce(request: AnswerRequest, messages: Anthropic.MessageParam[], before: TokenUsage): Promise<Anthropic.Message> {
  const current: TokenUsage = { inputTokens: 0, outputTokens: 0 };
  let streamedChars = 0;
  const stream = request.client.messages.stream(
    { model: request.model, max_tokens: request.maxTokens, system: request.system || undefined, messages: [...messages] },
    { signal: request.signal },
  );
  stream.on('streamEvent', (event) => {
    if (event.type === 'message_start') current.inputTokens = event.message.usage.input_tokens;
    else if (event.type === 'message_delta') current.outputTokens = event.usage.output_tokens;
    else if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') {
      request.transcript.text(event.delta.text);
      streamedChars += event.delta.text.length;
    }
    // Output tokens are only counted at the end of the stream; until then, estimate them from the text.
    request.onProgress({
      inputTokens: before.inputTokens + current.inputTokens,
      outputTokens: before.outputTokens + Math.max(current.outputTokens, Math.ceil(streamedChars / 4)),
    });
  });
  return stream.finalMessage();
}
