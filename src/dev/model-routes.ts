import type { IncomingMessage, ServerResponse } from 'node:http';
import { authError, presentedKey, readBody, redactHeaders, RequestRefusedError, sendApiError } from './model-http.js';
import { KeyConcurrency } from './key-concurrency.js';
import { makeId, planReply, sendReplyJson, streamReply } from './model-reply.js';
import { ScriptedPromptCache } from './prompt-cache.js';
import { RequestLog, type RequestBase } from './request-log.js';
import { parseScenario, type ApiErrorSpec, type Scenario } from './scenario.js';
import { selectTurn, type TurnSelection } from './scenario-match.js';
import { pause } from './sse.js';

/** Settings of {@link ModelRoutes}, resolved from the server's options. */
export interface ModelRoutesSettings {
  /** Where warnings go (unknown routes, unmatched requests, exhausted scripts). */
  log: (message: string) => void;
  /** @unit bytes */
  maxBodyBytes: number;
  maxRecordedRequests: number;
  /** Messages requests one API key may have open at once; beyond, 429 with `retry-after`. Unset: no limit. */
  concurrentRequestsPerKey?: number;
  /** The `retry-after` of those 429s. @unit seconds @default 1 */
  rateLimitRetryAfterSeconds?: number;
}

/** Rough token estimate for `count_tokens`: a quarter of the characters of the prompt parts. */
function estimateTokens(body: Record<string, unknown>): number {
  const chars = JSON.stringify([body.system ?? '', body.messages ?? [], body.tools ?? []]).length;
  return Math.max(1, Math.ceil(chars / 4));
}

/**
 * What the scripted model server answers, apart from listening: the Messages API routes, the `/_scenario`
 * control routes, and the state behind them (the scenario, the request log, `failFirst` counters, the prompt cache).
 */
export class ModelRoutes {
  readonly requests: RequestLog;
  // How many requests each scripted turn has seen, for `failFirst`. Key: `<ruleIndex|fallback>:<turn>`.
  private turnHits = new Map<string, number>();
  private readonly promptCache = new ScriptedPromptCache();
  private readonly keyConcurrency?: KeyConcurrency;

  constructor(
    private scenario: Scenario,
    private readonly settings: ModelRoutesSettings,
  ) {
    this.requests = new RequestLog(settings.maxRecordedRequests);
    if (settings.concurrentRequestsPerKey !== undefined) {
      this.keyConcurrency = new KeyConcurrency(settings.concurrentRequestsPerKey, settings.rateLimitRetryAfterSeconds ?? 1);
    }
  }

  /** Replaces the scenario (already validated) and resets records and `failFirst` counters. */
  setScenario(scenario: Scenario): void {
    this.scenario = scenario;
    this.reset();
  }

  /** Clears the recorded requests, the `failFirst` counters and the prompt cache. */
  reset(): void {
    this.requests.clear();
    this.turnHits = new Map();
    this.promptCache.clear();
  }

  /** Answers one request; `signal` aborts when the client goes away. */
  async handle(req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://model-server');
    const path = url.pathname;
    if (path === '/_scenario' || path.startsWith('/_scenario/')) return this.handleControl(req, res, path);
    const headers = { 'request-id': makeId('req') };
    const base: RequestBase = { method: req.method ?? 'GET', path, query: url.search.slice(1), headers: redactHeaders(req), body: undefined };
    const isMessages = req.method === 'POST' && path === '/v1/messages';
    const isCount = req.method === 'POST' && path === '/v1/messages/count_tokens';
    if (!isMessages && !isCount) {
      this.settings.log(`unexpected request ${req.method} ${req.url}: answered 404`);
      this.requests.add({ ...base, status: 404, outcome: 'not-found' });
      return sendApiError(res, { status: 404, message: `model server: no route ${req.method} ${path}` }, headers);
    }
    let body: Record<string, unknown>;
    try {
      body = await this.acceptBody(req, base);
    } catch (error) {
      if (!(error instanceof RequestRefusedError)) throw error;
      this.requests.add({ ...base, status: error.spec.status, outcome: 'rejected' });
      return sendApiError(res, error.spec, headers);
    }
    if (isCount) {
      this.requests.add({ ...base, status: 200, outcome: 'count-tokens' });
      res.writeHead(200, { ...headers, 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ input_tokens: estimateTokens(body) }));
    }
    // Authenticated above, so a key is present.
    const leave = this.keyConcurrency?.enter(presentedKey(req) ?? '');
    if (this.keyConcurrency && !leave) {
      this.requests.add({ ...base, status: 429, outcome: 'rate-limited' });
      return sendApiError(res, this.keyConcurrency.refusal(), headers);
    }
    try {
      return await this.handleMessages(res, body, base, headers, signal);
    } finally {
      leave?.();
    }
  }

  /**
   * Reads the JSON body into `base.body` (so the record keeps it even when the request is refused), then checks
   * that it is an object and that the request carries the scenario's key.
   * @throws RequestRefusedError with the API error to answer
   */
  private async acceptBody(req: IncomingMessage, base: RequestBase): Promise<Record<string, unknown>> {
    const text = await readBody(req, this.settings.maxBodyBytes);
    try {
      base.body = JSON.parse(text);
    } catch {
      throw new RequestRefusedError({ status: 400, message: 'the request body is not valid JSON' });
    }
    if (typeof base.body !== 'object' || base.body === null) {
      throw new RequestRefusedError({ status: 400, message: 'the request body must be a JSON object' });
    }
    const auth = authError(req, this.scenario);
    if (auth) throw new RequestRefusedError(auth);
    return base.body as Record<string, unknown>;
  }

  private async handleMessages(
    res: ServerResponse,
    body: Record<string, unknown>,
    base: RequestBase,
    headers: Record<string, string>,
    signal: AbortSignal,
  ): Promise<void> {
    if (!Array.isArray(body.messages) || typeof body.model !== 'string') {
      const spec = { status: 400, message: 'messages: expected an array; model: expected a string' };
      this.requests.add({ ...base, status: 400, outcome: 'rejected' });
      return sendApiError(res, spec, headers);
    }
    const selection = selectTurn(this.scenario, body.messages);
    if (selection.kind !== 'turn') {
      this.settings.log(selection.message);
      const where = selection.kind === 'exhausted' ? { rule: selection.ruleName, turn: selection.turnIndex } : {};
      this.requests.add({ ...base, ...where, status: 500, outcome: selection.kind });
      // x-should-retry: false, so neither the CLI nor the SDK retries a scripting mistake for minutes.
      const message = `model server: ${selection.message}`;
      return sendApiError(res, { status: 500, type: 'api_error', message, shouldRetry: false }, headers);
    }
    const where = { rule: selection.ruleName, turn: selection.turnIndex };
    const error = this.scriptedError(selection);
    if (error) {
      this.requests.add({ ...base, ...where, status: error.status, outcome: 'scripted-error' });
      return sendApiError(res, error, headers);
    }
    this.requests.add({ ...base, ...where, status: 200, outcome: 'reply' });
    const { turn } = selection;
    await pause(turn.delayMs ?? 0, signal);
    const plan = planReply(turn, body.model, this.scenario.promptCache ? this.promptCache.apply(body) : undefined);
    const timing = { chunks: turn.chunks, chunkDelayMs: turn.chunkDelayMs ?? 0, stallMs: turn.stallMs ?? 0 };
    if (body.stream === true) await streamReply(res, plan, timing, headers, signal);
    else await sendReplyJson(res, plan, timing, headers, signal);
  }

  /** Picks the answer for a scripted turn: one of its `failFirst` errors, its permanent `error`, or the reply. */
  private scriptedError(selection: Extract<TurnSelection, { kind: 'turn' }>): ApiErrorSpec | undefined {
    const key = `${selection.ruleIndex ?? 'fallback'}:${selection.scriptedIndex}`;
    const hits = this.turnHits.get(key) ?? 0;
    this.turnHits.set(key, hits + 1);
    return selection.turn.failFirst?.[hits] ?? selection.turn.error;
  }

  /** The `/_scenario` routes: read the records, reset, read or replace the scenario. */
  private async handleControl(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const json = (status: number, value: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    if (req.method === 'GET' && path === '/_scenario/requests') return json(200, this.requests.list());
    if (req.method === 'POST' && path === '/_scenario/reset') {
      this.reset();
      return json(200, { ok: true });
    }
    if (req.method === 'GET' && path === '/_scenario') return json(200, this.scenario);
    if (req.method === 'PUT' && path === '/_scenario') {
      let next: Scenario;
      try {
        next = parseScenario(await readBody(req, this.settings.maxBodyBytes), 'PUT /_scenario');
      } catch (error) {
        return json(400, { type: 'error', error: { type: 'invalid_request_error', message: (error as Error).message } });
      }
      this.setScenario(next);
      return json(200, { ok: true });
    }
    this.settings.log(`unknown control request ${req.method} ${path}`);
    return json(404, { type: 'error', error: { type: 'not_found_error', message: `no control endpoint ${req.method} ${path}` } });
  }
}
