import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { authError, readBody, redactHeaders, RequestRefusedError, sendApiError } from './model-http.js';
import { makeId, planReply, sendReplyJson, streamReply } from './model-reply.js';
import { ScriptedPromptCache } from './prompt-cache.js';
import { loadScenario, parseScenario, validateScenario, type ApiErrorSpec, type ScenarioInput } from './scenario.js';
import { selectTurn, type TurnSelection } from './scenario-match.js';
import { ClientGoneError, pause } from './sse.js';

/** Options of {@link startModelServer}. */
export interface ModelServerOptions {
  /** The scenario, or the path of a scenario YAML file. */
  scenario: ScenarioInput | string;
  /** Port to listen on; 0 picks a free one. @default 0 */
  port?: number;
  /** @default '127.0.0.1' */
  host?: string;
  /** Where warnings go (unknown routes, unmatched requests, exhausted scripts). @default a line on stderr */
  log?: (message: string) => void;
  /** Request bodies larger than this get 413 `request_too_large`, as from the real API. @unit bytes @default 32 MiB */
  maxBodyBytes?: number;
  /** Only the newest this many requests are kept in the record. @default 1000 */
  maxRecordedRequests?: number;
}

/** One request the server received, as {@link ModelServer.requests} and `GET /_scenario/requests` return it. */
export interface RecordedRequest {
  /** 0-based arrival order since the last reset. */
  seq: number;
  /** @format ISO 8601 */
  time: string;
  method: string;
  /** Path without the query string, e.g. `/v1/messages`. */
  path: string;
  /** The query string without `?`, e.g. `beta=true`; empty when none. */
  query: string;
  /** Request headers; `x-api-key`, `authorization` and cookies are replaced by `<redacted>`. */
  headers: Record<string, string>;
  /** The parsed JSON body, or `undefined` when there was none or it was not JSON. */
  body: unknown;
  /** The HTTP status the server answered with. */
  status: number;
  /** What the server did with the request. */
  outcome: 'reply' | 'scripted-error' | 'no-match' | 'exhausted' | 'rejected' | 'count-tokens' | 'not-found';
  /** For `/v1/messages`: the rule chosen (`fallback` for the fallback turn). */
  rule?: string;
  /** For `/v1/messages`: the conversation's turn index (assistant messages so far). */
  turn?: number;
}

/** A running scripted model server. */
export interface ModelServer {
  /** Base URL for `ANTHROPIC_BASE_URL` or the SDK's `baseURL`, e.g. `http://127.0.0.1:41234`. */
  url: string;
  /** A copy of the requests received since the last reset, oldest first. */
  requests(): RecordedRequest[];
  /** Replaces the scenario and resets records and `failFirst` counters. @throws ScenarioValidationError */
  setScenario(scenario: ScenarioInput): void;
  /** Clears the recorded requests and the `failFirst` counters. */
  reset(): void;
  /** Stops listening and cuts open connections. */
  close(): Promise<void>;
}

/** Rough token estimate for `count_tokens`: a quarter of the characters of the prompt parts. */
function estimateTokens(body: Record<string, unknown>): number {
  const chars = JSON.stringify([body.system ?? '', body.messages ?? [], body.tools ?? []]).length;
  return Math.max(1, Math.ceil(chars / 4));
}

/**
 * Starts the scripted model server: a fake Anthropic Messages API that answers from a scenario.
 * Resolves once it listens; `url` then holds the address to give the CLI or the SDK.
 * @throws ScenarioValidationError when the scenario is invalid
 */
export async function startModelServer(options: ModelServerOptions): Promise<ModelServer> {
  let scenario = typeof options.scenario === 'string' ? await loadScenario(options.scenario) : validateScenario(options.scenario);
  const log = options.log ?? ((message: string) => process.stderr.write(`[model-server] ${message}\n`));
  const maxBodyBytes = options.maxBodyBytes ?? 32 * 1024 * 1024;
  const maxRecorded = options.maxRecordedRequests ?? 1000;
  let records: RecordedRequest[] = [];
  let seq = 0;
  // How many requests each scripted turn has seen, for `failFirst`. Key: `<ruleIndex|fallback>:<turn>`.
  let turnHits = new Map<string, number>();
  const promptCache = new ScriptedPromptCache();

  const reset = (): void => {
    records = [];
    seq = 0;
    turnHits = new Map();
    promptCache.clear();
  };

  const record = (entry: Omit<RecordedRequest, 'seq' | 'time'>): void => {
    records.push({ seq: seq++, time: new Date().toISOString(), ...entry });
    if (records.length > maxRecorded) records.splice(0, records.length - maxRecorded);
  };

  /** Picks the answer for a scripted turn: one of its `failFirst` errors, its permanent `error`, or the reply. */
  const scriptedError = (selection: Extract<TurnSelection, { kind: 'turn' }>): ApiErrorSpec | undefined => {
    const key = `${selection.ruleIndex ?? 'fallback'}:${selection.scriptedIndex}`;
    const hits = turnHits.get(key) ?? 0;
    turnHits.set(key, hits + 1);
    return selection.turn.failFirst?.[hits] ?? selection.turn.error;
  };

  async function handleMessages(
    res: ServerResponse,
    body: Record<string, unknown>,
    base: Omit<RecordedRequest, 'seq' | 'time' | 'status' | 'outcome'>,
    headers: Record<string, string>,
    signal: AbortSignal,
  ): Promise<void> {
    if (!Array.isArray(body.messages) || typeof body.model !== 'string') {
      const spec = { status: 400, message: 'messages: expected an array; model: expected a string' };
      record({ ...base, status: 400, outcome: 'rejected' });
      return sendApiError(res, spec, headers);
    }
    const selection = selectTurn(scenario, body.messages);
    if (selection.kind !== 'turn') {
      log(selection.message);
      const where = selection.kind === 'exhausted' ? { rule: selection.ruleName, turn: selection.turnIndex } : {};
      record({ ...base, ...where, status: 500, outcome: selection.kind });
      // x-should-retry: false, so neither the CLI nor the SDK retries a scripting mistake for minutes.
      const message = `model server: ${selection.message}`;
      return sendApiError(res, { status: 500, type: 'api_error', message, shouldRetry: false }, headers);
    }
    const where = { rule: selection.ruleName, turn: selection.turnIndex };
    const error = scriptedError(selection);
    if (error) {
      record({ ...base, ...where, status: error.status, outcome: 'scripted-error' });
      return sendApiError(res, error, headers);
    }
    record({ ...base, ...where, status: 200, outcome: 'reply' });
    const { turn } = selection;
    await pause(turn.delayMs ?? 0, signal);
    const plan = planReply(turn, body.model, scenario.promptCache ? promptCache.apply(body) : undefined);
    const timing = { chunks: turn.chunks, chunkDelayMs: turn.chunkDelayMs ?? 0, stallMs: turn.stallMs ?? 0 };
    if (body.stream === true) await streamReply(res, plan, timing, headers, signal);
    else await sendReplyJson(res, plan, timing, headers, signal);
  }

  async function handleControl(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const json = (status: number, value: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    if (req.method === 'GET' && path === '/_scenario/requests') return json(200, records);
    if (req.method === 'POST' && path === '/_scenario/reset') {
      reset();
      return json(200, { ok: true });
    }
    if (req.method === 'GET' && path === '/_scenario') return json(200, scenario);
    if (req.method === 'PUT' && path === '/_scenario') {
      try {
        scenario = parseScenario(await readBody(req, maxBodyBytes), 'PUT /_scenario');
      } catch (error) {
        return json(400, { type: 'error', error: { type: 'invalid_request_error', message: (error as Error).message } });
      }
      reset();
      return json(200, { ok: true });
    }
    log(`unknown control request ${req.method} ${path}`);
    return json(404, { type: 'error', error: { type: 'not_found_error', message: `no control endpoint ${req.method} ${path}` } });
  }

  async function handle(req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://model-server');
    const path = url.pathname;
    if (path === '/_scenario' || path.startsWith('/_scenario/')) return handleControl(req, res, path);
    const headers = { 'request-id': makeId('req') };
    const base = {
      method: req.method ?? 'GET',
      path,
      query: url.search.slice(1),
      headers: redactHeaders(req),
      body: undefined as unknown,
    };
    const isMessages = req.method === 'POST' && path === '/v1/messages';
    const isCount = req.method === 'POST' && path === '/v1/messages/count_tokens';
    if (!isMessages && !isCount) {
      log(`unexpected request ${req.method} ${req.url}: answered 404`);
      record({ ...base, status: 404, outcome: 'not-found' });
      return sendApiError(res, { status: 404, message: `model server: no route ${req.method} ${path}` }, headers);
    }
    try {
      const text = await readBody(req, maxBodyBytes);
      try {
        base.body = JSON.parse(text);
      } catch {
        throw new RequestRefusedError({ status: 400, message: 'the request body is not valid JSON' });
      }
      if (typeof base.body !== 'object' || base.body === null) {
        throw new RequestRefusedError({ status: 400, message: 'the request body must be a JSON object' });
      }
      const auth = authError(req, scenario);
      if (auth) throw new RequestRefusedError(auth);
    } catch (error) {
      if (!(error instanceof RequestRefusedError)) throw error;
      record({ ...base, status: error.spec.status, outcome: 'rejected' });
      return sendApiError(res, error.spec, headers);
    }
    const body = base.body as Record<string, unknown>;
    if (isCount) {
      record({ ...base, status: 200, outcome: 'count-tokens' });
      res.writeHead(200, { ...headers, 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ input_tokens: estimateTokens(body) }));
    }
    return handleMessages(res, body, base, headers, signal);
  }

  const server = createServer((req, res) => {
    const aborter = new AbortController();
    res.on('close', () => aborter.abort());
    handle(req, res, aborter.signal).catch((error: unknown) => {
      if (error instanceof ClientGoneError) return;
      log(`internal error on ${req.method} ${req.url}: ${(error as Error).stack ?? String(error)}`);
      if (res.headersSent) res.destroy();
      else sendApiError(res, { status: 500, message: `model server internal error: ${(error as Error).message}` }, {});
    });
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const urlHost = host.includes(':') ? `[${host}]` : host;

  return {
    url: `http://${urlHost}:${port}`,
    requests: () => records.map((r) => ({ ...r })),
    setScenario(next) {
      scenario = validateScenario(next);
      reset();
    },
    reset,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
