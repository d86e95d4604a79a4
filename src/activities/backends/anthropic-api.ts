import Anthropic from '@anthropic-ai/sdk';
import { CancelledFailure } from '@temporalio/common';
import path from 'node:path';
import type { TokenUsage } from '../../pipeline/stage-result.js';
import { failureTypeForStatus, stageFailure } from '../failures.js';
import { redactSecrets } from '../secrets.js';
import { writeFileAtomic } from '../workspace.js';
import { loadConversation, newConversationId, saveConversation } from './api-conversation.js';
import { ApiTranscript } from './api-transcript.js';
import type { BackendOutcome, BackendRequest } from './backend.js';
import { computeCostUsd, resolveModelId, type ModelCatalog } from './models.js';
import { systemBlocksOf, withCacheBreakpoints } from './prompt-cache.js';

export interface AnthropicApiOptions {
  /** Built by the worker with `maxRetries: 0`: Temporal owns retries. Absent when no API key is configured. */
  client?: Anthropic;
  models: ModelCatalog;
}

/** Answer length when the stage sets no `maxTokens`. @unit tokens */
const DEFAULT_MAX_TOKENS = 16_000;

/** Where an API stage's answer lands, relative to the workspace. */
function apiOutputPath(stageId: string): string {
  return path.join('outputs', `${stageId}.md`);
}

/**
 * Runs one stage attempt as a single streamed Messages API call. The answer lands atomically in
 * `outputs/<stage>.md`; the conversation is kept in the stage's folder so a continuation (answer,
 * rework, report fix) re-sends it with the new message appended.
 */
export async function runAnthropicApi(request: BackendRequest, options: AnthropicApiOptions): Promise<BackendOutcome> {
  const { stage, prompt, continuation } = request;
  if (!options.client) {
    throw stageFailure({ type: 'API_KEY_MISSING', stageId: stage.id, message: `no ANTHROPIC_API_KEY is configured for the anthropic-api backend` });
  }
  const model = resolveModelId(stage.model, options.models);
  const maxTokens = stage.maxTokens ?? DEFAULT_MAX_TOKENS;
  const warnings: string[] = [];
  const sessionsDir = path.join(request.workspace.stageDir(stage.id), 'api-sessions');
  const earlier = continuation?.sessionId ? await loadConversation(sessionsDir, continuation.sessionId) : undefined;
  if (continuation?.sessionId && !earlier) {
    warnings.push(`conversation ${continuation.sessionId} could not be found; the stage started over with its full prompt`);
  }
  const sessionId = earlier?.id ?? newConversationId();
  const messages: Anthropic.MessageParam[] = earlier
    ? [...earlier.messages, { role: 'user', content: continuation!.message }]
    : [{ role: 'user', content: continuation ? `${prompt.user}\n\n## Continue\n${continuation.message}` : prompt.user }];
  // A continuation re-sends the system blocks its conversation started with, so the cached prefix still matches.
  const systemBlocks = earlier?.systemBlocks ?? systemBlocksOf(prompt);
  const cache = stage.cache !== false;

  const transcript = await ApiTranscript.open(request.transcriptPath);
  transcript.write({
    type: 'system',
    subtype: 'init',
    backend: 'anthropic-api',
    session_id: sessionId,
    model,
    request: {
      max_tokens: maxTokens,
      system_chars: systemBlocks.reduce((sum, block) => sum + block.length, 0),
      cache,
      messages: messages.map((m) => ({ role: m.role, chars: typeof m.content === 'string' ? m.content.length : JSON.stringify(m.content).length })),
      continuation: continuation?.kind,
      prompt_start: String(messages[messages.length - 1].content).slice(0, 2_000),
    },
  });

  const started = Date.now();
  const usage: Required<TokenUsage> = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
  let streamedChars = 0;
  let message: Anthropic.Message;
  try {
    const stream = options.client.messages.stream(
      { model, max_tokens: maxTokens, ...withCacheBreakpoints(systemBlocks, messages, cache) },
      { signal: request.signal },
    );
    stream.on('streamEvent', (event) => {
      if (event.type === 'message_start') Object.assign(usage, usageOf(event.message.usage));
      else if (event.type === 'message_delta') usage.outputTokens = event.usage.output_tokens;
      else if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') {
        transcript.text(event.delta.text);
        streamedChars += event.delta.text.length;
      }
      // Output tokens are only counted at the end of the stream; until then, estimate them from the text.
      const soFar = { ...usage, outputTokens: Math.max(usage.outputTokens, Math.ceil(streamedChars / 4)) };
      // The SDK throttles heartbeats, so one per event is cheap.
      request.heartbeat({ sessionId, turns: 0, costUsd: computeCostUsd(model, soFar, options.models) ?? 0, lastEventAt: Date.now(), usage: soFar });
    });
    message = await stream.finalMessage();
  } catch (err) {
    const cancelled = request.signal.aborted;
    const failure = cancelled ? undefined : classifyApiError(stage.id, model, err);
    transcript.write({
      type: 'result',
      subtype: cancelled ? 'cancelled' : 'error',
      is_error: true,
      session_id: sessionId,
      duration_ms: Date.now() - started,
      error: { type: failure?.type ?? 'CANCELLED', message: failure?.message ?? 'the attempt was cancelled' },
    });
    await transcript.close();
    if (cancelled) throw request.signal.reason instanceof Error ? request.signal.reason : new CancelledFailure('the attempt was cancelled');
    throw failure;
  }

  const text = message.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
  const finalUsage = usageOf(message.usage);
  const costUsd = computeCostUsd(model, finalUsage, options.models);
  const durationMs = Date.now() - started;
  transcript.write({ type: 'assistant', session_id: sessionId, message: { model: message.model, role: 'assistant', content: message.content, stop_reason: message.stop_reason, usage: message.usage } });
  transcript.write({
    type: 'result',
    subtype: 'success',
    is_error: false,
    session_id: sessionId,
    result: text,
    stop_reason: message.stop_reason,
    num_turns: 1,
    duration_ms: durationMs,
    total_cost_usd: costUsd,
    usage: message.usage,
  });
  await transcript.close();

  if (text.trim() === '') {
    throw stageFailure({
      type: 'RESPONSE_EMPTY',
      stageId: stage.id,
      message: `the model (${model}) answered with no text (stop reason ${message.stop_reason})`,
      details: { stopReason: message.stop_reason, usage: finalUsage, costUsd },
    });
  }
  if (message.stop_reason === 'max_tokens') {
    warnings.push(`RESPONSE_TRUNCATED: the answer stopped at max_tokens (${maxTokens}) and is kept as it is; raise maxTokens for stage ${stage.id}`);
  }
  if (costUsd === null) {
    warnings.push(`no price is known for model ${model}, so this stage's cost is not counted; add it to the prices in AGENT_PIPELINE_MODELS`);
  } else if (request.maxBudgetUsd !== undefined && costUsd > request.maxBudgetUsd) {
    warnings.push(`BUDGET_EXCEEDED: the call cost $${costUsd.toFixed(4)}, more than the stage's cap of $${request.maxBudgetUsd.toFixed(4)}`);
  }
  request.claimFile(apiOutputPath(stage.id));
  // A model that echoes a key (it saw one in a file) must not write it into the workspace.
  await writeFileAtomic(path.join(request.workspace.dir, apiOutputPath(stage.id)), redactSecrets(text));
  await saveConversation(sessionsDir, {
    id: sessionId,
    model,
    system: prompt.system,
    systemBlocks,
    messages: redactSecrets([...messages, { role: 'assistant', content: text }]),
    updatedAt: Date.now(),
  });
  return { text, sessionId, usage: finalUsage, costUsd, numTurns: 1, durationMs, warnings };
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

/** Maps the SDK's errors to the catalogue; `retry-after` becomes Temporal's next retry delay. */
function classifyApiError(stageId: string, model: string, err: unknown) {
  if (!(err instanceof Anthropic.APIError)) {
    return stageFailure({
      type: 'INTERNAL_ERROR',
      stageId,
      message: `the Messages API call failed unexpectedly: ${err instanceof Error ? err.message : String(err)}`,
      cause: err instanceof Error ? err : undefined,
    });
  }
  const status = err instanceof Anthropic.APIConnectionError ? undefined : err.status;
  const type = failureTypeForStatus(status, err.type);
  const retryAfterMs = readRetryAfterMs(err.headers);
  const what = status ? `answered ${status}${err.type ? ` ${err.type}` : ''}` : err instanceof Anthropic.APIConnectionError ? 'could not be reached' : `sent an error mid-stream${err.type ? ` (${err.type})` : ''}`;
  const said = err.apiMessage ?? (err.cause instanceof Error ? err.cause.message : err.message);
  return stageFailure({
    type,
    stageId,
    message: `the Messages API ${what} for model ${model}: ${said}${retryAfterMs !== undefined && type === 'RATE_LIMITED' ? ` (retry after ${Math.round(retryAfterMs / 1000)}s)` : ''}`,
    hint: status === 404 && type === 'INVALID_REQUEST' ? `check the stage's \`model\` (${model}); model tiers map to ids through AGENT_PIPELINE_MODELS` : undefined,
    details: { status, errorType: err.type, requestId: err.requestID, model, retryAfterMs },
    nextRetryDelayMs: type === 'RATE_LIMITED' || type === 'OVERLOADED' ? retryAfterMs : undefined,
    cause: err,
  });
}

/** `retry-after-ms`, else `retry-after` in seconds or as an HTTP date. */
function readRetryAfterMs(headers: Headers | undefined): number | undefined {
  const ms = Number(headers?.get('retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) return ms;
  const value = headers?.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds > 0 ? seconds * 1000 : undefined;
  const date = Date.parse(value);
  return Number.isFinite(date) && date > Date.now() ? date - Date.now() : undefined;
}
