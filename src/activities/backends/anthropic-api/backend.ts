import Anthropic from '@anthropic-ai/sdk';
import { CancelledFailure } from '@temporalio/common';
import path from 'node:path';
import { failureTypeForStatus, stageFailure } from '../../failures.js';
import { redactSecrets } from '../../secrets.js';
import { streamAnswer, type Answer } from './answer.js';
import { writeDeliverable } from './deliverable.js';
import { loadConversation, newConversationId, saveConversation } from './conversation.js';
import { ApiTranscript } from './transcript.js';
import type { BackendOutcome, BackendRequest } from '../stage-backend.js';
import { computeCostUsd, resolveModelId, type ModelCatalog } from '../models.js';
import { systemBlocksOf } from './prompt-cache.js';

export interface AnthropicApiOptions {
  /** Built by the worker with `maxRetries: 0`: Temporal owns retries. Absent when no API key is configured. */
  client?: Anthropic;
  models: ModelCatalog;
}

/** Answer length when the stage sets no `maxTokens`. @unit tokens */
const DEFAULT_MAX_TOKENS = 16_000;

/** Continuations of a cut-off answer when the stage was resolved without `maxContinuations`. */
const DEFAULT_MAX_CONTINUATIONS = 2;

/** Where an API stage's answer lands, relative to the workspace. */
function apiOutputPath(stageId: string): string {
  return path.join('outputs', `${stageId}.md`);
}

/**
 * Runs one stage attempt as a streamed Messages API call, continued while the answer is cut off at
 * `maxTokens` (see api-answer.ts). The answer, without its report block, lands atomically in
 * `outputs/<stage>.md` (see api-deliverable.ts); the conversation is kept in the stage's folder so a
 * continuation (answer, rework, report fix) re-sends it with the new message appended.
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
  let answer: Answer;
  try {
    answer = await streamAnswer({
      client: options.client,
      model,
      maxTokens,
      systemBlocks,
      cache,
      messages,
      maxContinuations: stage.maxContinuations ?? DEFAULT_MAX_CONTINUATIONS,
      signal: request.signal,
      transcript,
      sessionId,
      contract: stage.contract,
      // The SDK throttles heartbeats, so one per event is cheap.
      onProgress: (soFar) => request.heartbeat({ sessionId, turns: 0, costUsd: computeCostUsd(model, soFar, options.models) ?? 0, lastEventAt: Date.now(), usage: soFar }),
    });
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

  const { text, usage: finalUsage, stopReason, calls } = answer;
  const costUsd = computeCostUsd(model, finalUsage, options.models);
  const durationMs = Date.now() - started;
  transcript.write({
    type: 'result',
    subtype: 'success',
    is_error: false,
    session_id: sessionId,
    result: text,
    stop_reason: stopReason,
    num_turns: calls,
    duration_ms: durationMs,
    total_cost_usd: costUsd,
    usage: {
      input_tokens: finalUsage.inputTokens,
      output_tokens: finalUsage.outputTokens,
      cache_read_input_tokens: finalUsage.cacheReadTokens ?? 0,
      cache_creation_input_tokens: finalUsage.cacheWriteTokens ?? 0,
    },
  });
  await transcript.close();

  if (text.trim() === '') {
    throw stageFailure({
      type: 'RESPONSE_EMPTY',
      stageId: stage.id,
      message: `the model (${model}) answered with no text (stop reason ${stopReason})`,
      details: { stopReason, usage: finalUsage, costUsd },
    });
  }
  warnings.push(...lengthWarnings(stage.id, maxTokens, stopReason, calls));
  if (costUsd === null) {
    warnings.push(`no price is known for model ${model}, so this stage's cost is not counted; add it to the prices in AGENT_PIPELINE_MODELS`);
  } else if (request.maxBudgetUsd !== undefined && costUsd > request.maxBudgetUsd) {
    warnings.push(`BUDGET_EXCEEDED: the call cost $${costUsd.toFixed(4)}, more than the stage's cap of $${request.maxBudgetUsd.toFixed(4)}`);
  }
  await writeDeliverable({ request, relativePath: request.outputPath ?? apiOutputPath(stage.id), answer: text, contract: stage.contract });
  await saveConversation(sessionsDir, {
    id: sessionId,
    model,
    system: prompt.system,
    systemBlocks,
    messages: redactSecrets(answer.messages),
    updatedAt: Date.now(),
  });
  return { text, sessionId, usage: finalUsage, costUsd, numTurns: calls, durationMs, warnings };
}

/** What a person should know about the answer's length: continued past `maxTokens`, or still cut off. */
function lengthWarnings(stageId: string, maxTokens: number, stopReason: string | null, calls: number): string[] {
  const continued = calls > 1 ? ` after ${calls - 1} continuation${calls > 2 ? 's' : ''}` : '';
  if (stopReason === 'max_tokens') {
    return [`RESPONSE_TRUNCATED: the answer stopped at max_tokens (${maxTokens})${continued} and is kept as it is; raise maxTokens (or maxContinuations) for stage ${stageId}`];
  }
  if (calls > 1) {
    return [`RESPONSE_CONTINUED: the answer reached max_tokens (${maxTokens}) and was completed${continued}; raise maxTokens for stage ${stageId} to answer in one call`];
  }
  return [];
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
