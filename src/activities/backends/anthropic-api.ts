import Anthropic from '@anthropic-ai/sdk';
import path from 'node:path';
import { failureTypeForStatus, stageFailure } from '../failures.js';
import { writeFileAtomic } from '../workspace.js';
import type { BackendOutcome, BackendRequest } from './backend.js';
import { computeCostUsd, resolveModelId, type ModelCatalog } from './models.js';

export interface AnthropicApiOptions {
  /** Built by the worker with `maxRetries: 0`: Temporal owns retries. Absent when no API key is configured. */
  client?: Anthropic;
  models: ModelCatalog;
}

/** Default answer length when the stage sets no `maxTokens`. */
const DEFAULT_MAX_TOKENS = 16_000;

/** Runs one stage attempt as a single streamed Messages API call; the answer lands in `outputs/<stage>.md`. */
export async function runAnthropicApi(request: BackendRequest, options: AnthropicApiOptions): Promise<BackendOutcome> {
  const { stage } = request;
  if (!options.client) {
    throw stageFailure({
      type: 'API_KEY_MISSING',
      stageId: stage.id,
      message: 'no ANTHROPIC_API_KEY in the worker environment; set it where the worker runs',
    });
  }
  const model = resolveModelId(stage.model, options.models);
  const started = Date.now();
  let message: Anthropic.Message;
  try {
    const stream = options.client.messages.stream(
      {
        model,
        max_tokens: stage.maxTokens ?? DEFAULT_MAX_TOKENS,
        system: request.prompt.system,
        messages: [{ role: 'user', content: request.prompt.user }],
      },
      { signal: request.signal },
    );
    stream.on('text', () => {
      // The SDK throttles heartbeats, so one per chunk is cheap.
      request.heartbeat({ turns: 0, costUsd: 0, lastEventAt: Date.now(), sessionId: undefined });
    });
    message = await stream.finalMessage();
  } catch (err) {
    if (request.signal.aborted && request.signal.reason instanceof Error) throw request.signal.reason;
    throw classifyApiError(stage.id, err);
  }

  const text = message.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
  const warnings: string[] = [];
  if (message.stop_reason === 'max_tokens') {
    warnings.push(`RESPONSE_TRUNCATED: the answer hit max_tokens (${stage.maxTokens ?? DEFAULT_MAX_TOKENS}); raise maxTokens for stage ${stage.id}`);
  }
  if (text.trim() === '') {
    throw stageFailure({ type: 'RESPONSE_EMPTY', stageId: stage.id, message: `the model (${model}) answered with no text`, details: { stopReason: message.stop_reason } });
  }
  await writeFileAtomic(path.join(request.workspace.dir, 'outputs', `${stage.id}.md`), text);
  const usage = { inputTokens: message.usage.input_tokens, outputTokens: message.usage.output_tokens };
  return {
    text,
    usage,
    costUsd: computeCostUsd(model, usage, options.models),
    numTurns: 1,
    durationMs: Date.now() - started,
    warnings,
  };
}

/** Maps the SDK's error classes to the catalogue; `retry-after` becomes Temporal's next retry delay. */
function classifyApiError(stageId: string, err: unknown) {
  if (err instanceof Anthropic.APIError) {
    const status = err instanceof Anthropic.APIConnectionError ? undefined : err.status;
    const retryAfter = Number(err.headers?.get?.('retry-after'));
    return stageFailure({
      type: failureTypeForStatus(status),
      stageId,
      message: `the Messages API failed${status ? ` with ${status}` : ''}: ${err.message}`,
      details: { status, requestId: err.requestID },
      nextRetryDelayMs: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined,
      cause: err,
    });
  }
  throw err;
}
