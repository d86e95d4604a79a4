import type Anthropic from '@anthropic-ai/sdk';
import { CancelledFailure } from '@temporalio/common';
import { openStageFolder } from '../../workspace/run-workspace.js';
import { FINAL_EMPTY_ANSWER_HINT, stageFailure } from '../../failures.js';
import { defaultOutputPath } from '../../outputs/stage-outputs.js';
import { redactSecrets } from '../../secrets.js';
import { streamAnswer, type Answer } from './answer.js';
import { classifyApiError } from './api-error.js';
import { writeAnswerFile } from './answer-file.js';
import { loadConversation, newConversationId, saveConversation } from './conversation.js';
import { ApiTranscript } from './transcript.js';
import { quietHeartbeatIntervalMs, type AttemptProgress, type BackendOutcome, type BackendRequest } from '../stage-backend.js';
import { computeCostUsd, resolveModelId, type ModelCatalog } from '../models.js';
import { systemBlocksOf } from './prompt-cache.js';
import type { ApiKeyLimiter, ThrottledWait } from '../../api-key/key-limiter.js';
import type { CallLimits } from './limited-call.js';

export interface AnthropicApiOptions {
  /** Built by the worker with `maxRetries: 0`: Temporal owns retries. Absent when no API key is configured. */
  client?: Anthropic;
  models: ModelCatalog;
  /** The shared limits of the worker's API key (src/activities/api-key/); absent without a key. */
  limiter?: ApiKeyLimiter;
}

/** Answer length when the stage sets no `maxTokens`. @unit tokens */
const DEFAULT_MAX_TOKENS = 16_000;

/** Continuations of a cut-off answer when the stage was resolved without `maxContinuations`. */
const DEFAULT_MAX_CONTINUATIONS = 2;

/**
 * Runs one stage attempt as a streamed Messages API call, continued while the answer is cut off at
 * `maxTokens` (see answer.ts). The answer, without its report block, lands atomically in the stage's
 * answer file, `request.outputPath` (see answer-file.ts); the conversation is kept in the stage's folder so a
 * continuation (answer, rework, report fix) re-sends it with the new message appended.
 */
export async function runAnthropicApi(request: BackendRequest, options: AnthropicApiOptions): Promise<BackendOutcome> {
  const { stage } = request;
  if (!options.client) {
    throw stageFailure({ type: 'API_KEY_MISSING', stageId: stage.id, message: `no ANTHROPIC_API_KEY is configured for the anthropic-api backend` });
  }
  const call = await openConversation(request, resolveModelId(stage.model, options.models));
  const transcript = await ApiTranscript.open(request.transcriptPath);
  recordRequest(transcript, call, request.continuation?.kind);
  const started = Date.now();
  // While the attempt runs, the worker keeps its view of the key's shared pause fresh.
  const doneWithKey = options.limiter?.use();
  const answer = await streamCall(request, call, { client: options.client, models: options.models, limiter: options.limiter, transcript, started }).finally(doneWithKey);
  const { text, usage, stopReason, calls } = answer;
  const costUsd = computeCostUsd(call.model, usage, options.models);
  const durationMs = Date.now() - started;
  recordResult(transcript, call, answer, { costUsd, durationMs });
  await transcript.close();
  if (text.trim() === '') {
    // A stage whose `retry.nonRetryable` lists RESPONSE_EMPTY made an empty answer final: say so, not "retried".
    const final = stage.retry?.nonRetryable?.includes('RESPONSE_EMPTY') === true;
    throw stageFailure({
      type: 'RESPONSE_EMPTY',
      stageId: stage.id,
      message: `the model (${call.model}) answered with no text (stop reason ${stopReason})${final ? ", and the stage's `retry.nonRetryable` lists RESPONSE_EMPTY" : ''}`,
      ...(final ? { nonRetryable: true, hint: FINAL_EMPTY_ANSWER_HINT } : {}),
      details: { stopReason, usage, costUsd },
    });
  }
  const warnings = [...call.warnings, ...lengthWarnings(stage.id, call.maxTokens, stopReason, calls), ...costWarnings(call.model, costUsd, request.maxBudgetUsd)];
  await writeAnswerFile({ request, relativePath: request.outputPath ?? defaultOutputPath(stage.id), answer: text, contract: stage.contract });
  await saveConversation(call.sessionsDir, {
    id: call.sessionId,
    model: call.model,
    system: request.prompt.system,
    systemBlocks: call.systemBlocks,
    messages: redactSecrets(answer.messages),
    updatedAt: Date.now(),
  });
  return { text, sessionId: call.sessionId, usage, costUsd, numTurns: calls, durationMs, warnings };
}

/** One attempt's Messages API conversation, ready to send. */
interface ApiCall {
  model: string;
  /** @unit tokens */
  maxTokens: number;
  cache: boolean;
  /** The conversation's id, which plays the CLI's session id. */
  sessionId: string;
  /** Where the stage's conversations are kept. */
  sessionsDir: string;
  systemBlocks: string[];
  /** The conversation so far, ending with the message to answer. */
  messages: Anthropic.MessageParam[];
  warnings: string[];
}

/** The conversation a continuation carries on (with its message appended), or a new one with the task prompt. */
async function openConversation(request: BackendRequest, model: string): Promise<ApiCall> {
  const { stage, prompt, continuation } = request;
  const warnings: string[] = [];
  const sessionsDir = await openStageFolder(request.workspace, stage.id, 'api-sessions');
  const earlier = continuation?.sessionId ? await loadConversation(sessionsDir, continuation.sessionId) : undefined;
  if (continuation?.sessionId && !earlier) {
    warnings.push(`conversation ${continuation.sessionId} could not be found; the stage started over with its full prompt`);
  }
  const messages: Anthropic.MessageParam[] = earlier
    ? [...earlier.messages, { role: 'user', content: continuation!.message }]
    : [{ role: 'user', content: continuation ? `${prompt.user}\n\n## Continue\n${continuation.message}` : prompt.user }];
  return {
    model,
    maxTokens: stage.maxTokens ?? DEFAULT_MAX_TOKENS,
    // A continuation re-sends the system blocks its conversation started with, so the cached prefix still matches.
    systemBlocks: earlier?.systemBlocks ?? systemBlocksOf(prompt),
    cache: stage.cache !== false,
    sessionId: earlier?.id ?? newConversationId(),
    sessionsDir,
    messages,
    warnings,
  };
}

/** The transcript's first line: a summary of the request (sizes and the start of the prompt, never keys). */
function recordRequest(transcript: ApiTranscript, call: ApiCall, continuation: string | undefined): void {
  const { messages, systemBlocks } = call;
  transcript.write({
    type: 'system',
    subtype: 'init',
    backend: 'anthropic-api',
    session_id: call.sessionId,
    model: call.model,
    request: {
      max_tokens: call.maxTokens,
      system_chars: systemBlocks.reduce((sum, block) => sum + block.length, 0),
      cache: call.cache,
      messages: messages.map((m) => ({ role: m.role, chars: typeof m.content === 'string' ? m.content.length : JSON.stringify(m.content).length })),
      continuation,
      prompt_start: String(messages[messages.length - 1].content).slice(0, 2_000),
    },
  });
}

/**
 * The streamed answer, heartbeating its cost so far. A failure is recorded in the transcript, which is then closed.
 * @throws the cancellation as Temporal gave it; the catalogue's failure for an API error
 */
async function streamCall(
  request: BackendRequest,
  call: ApiCall,
  using: { client: Anthropic; models: ModelCatalog; limiter?: ApiKeyLimiter; transcript: ApiTranscript; started: number },
): Promise<Answer> {
  const { stage, signal } = request;
  const { model, sessionId } = call;
  let progress: AttemptProgress = { sessionId, turns: 0, costUsd: 0, lastEventAt: using.started };
  let throttled: ThrottledWait | undefined;
  // A throttled wait rides along every heartbeat until the call may go, so `status` can say what the stage waits for.
  const report = (next: AttemptProgress): void => {
    progress = next;
    request.heartbeat(throttled ? { ...next, throttled } : next);
  };
  report(progress);
  // A cancellation arrives only in a heartbeat's answer: a model that has not sent a byte yet must not keep the attempt
  // deaf to it, so the last progress is repeated.
  const keepAlive = setInterval(() => report(progress), quietHeartbeatIntervalMs(stage));
  const limits: CallLimits | undefined = using.limiter && {
    limiter: using.limiter,
    label: `model call of stage ${stage.id}`,
    onThrottled: (wait) => {
      throttled = wait;
      report(progress);
    },
    onRateLimited: (status, retryAfterMs) => using.transcript.write({ type: 'system', subtype: 'rate_limited', session_id: sessionId, status, retry_after_ms: retryAfterMs, api_key: using.limiter?.keyId }),
  };
  try {
    return await streamAnswer({
      client: using.client,
      model,
      maxTokens: call.maxTokens,
      systemBlocks: call.systemBlocks,
      cache: call.cache,
      messages: call.messages,
      maxContinuations: stage.maxContinuations ?? DEFAULT_MAX_CONTINUATIONS,
      signal,
      transcript: using.transcript,
      sessionId,
      contract: stage.contract,
      limits,
      // The SDK throttles heartbeats, so one per event is cheap.
      onProgress: (soFar) => report({ sessionId, turns: 0, costUsd: computeCostUsd(model, soFar, using.models) ?? 0, lastEventAt: Date.now(), usage: soFar }),
    });
  } catch (err) {
    const cancelled = signal.aborted;
    const failure = cancelled ? undefined : classifyApiError(stage.id, model, err);
    using.transcript.write({
      type: 'result',
      subtype: cancelled ? 'cancelled' : 'error',
      is_error: true,
      session_id: sessionId,
      duration_ms: Date.now() - using.started,
      error: { type: failure?.type ?? 'CANCELLED', message: failure?.message ?? 'the attempt was cancelled' },
    });
    await using.transcript.close();
    if (cancelled) throw signal.reason instanceof Error ? signal.reason : new CancelledFailure('the attempt was cancelled');
    throw failure;
  } finally {
    clearInterval(keepAlive);
  }
}

/** The transcript's last line for an answer: what it cost and why it stopped. */
function recordResult(transcript: ApiTranscript, call: ApiCall, answer: Answer, totals: { costUsd: number | null; durationMs: number }): void {
  const { usage } = answer;
  transcript.write({
    type: 'result',
    subtype: 'success',
    is_error: false,
    session_id: call.sessionId,
    result: answer.text,
    stop_reason: answer.stopReason,
    num_turns: answer.calls,
    duration_ms: totals.durationMs,
    total_cost_usd: totals.costUsd,
    usage: {
      input_tokens: usage.inputTokens,
      output_tokens: usage.outputTokens,
      cache_read_input_tokens: usage.cacheReadTokens ?? 0,
      cache_creation_input_tokens: usage.cacheWriteTokens ?? 0,
    },
  });
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

/** What a person should know about the cost: unknown for the model, or over the attempt's cap. */
function costWarnings(model: string, costUsd: number | null, maxBudgetUsd: number | undefined): string[] {
  if (costUsd === null) {
    return [`no price is known for model ${model}, so this stage's cost is not counted; add it to the prices in AGENT_PIPELINE_MODELS`];
  }
  if (maxBudgetUsd !== undefined && costUsd > maxBudgetUsd) {
    return [`BUDGET_EXCEEDED: the call cost $${costUsd.toFixed(4)}, more than the stage's cap of $${maxBudgetUsd.toFixed(4)}`];
  }
  return [];
}
