import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sendApiError } from './model-http.js';
import { ModelRoutes } from './model-routes.js';
import type { RecordedRequest } from './request-log.js';
import { loadScenario, validateScenario, type ScenarioInput } from './scenario.js';
import { ClientGoneError } from './sse.js';

export type { RecordedRequest };

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
  /**
   * Messages requests one API key may have open at once, like the real API's concurrency limit: a request beyond it
   * is answered 429 `rate_limit_error` with `retry-after`. @default no limit
   */
  concurrentRequestsPerKey?: number;
  /** The `retry-after` of those 429s. @unit seconds @default 1 */
  rateLimitRetryAfterSeconds?: number;
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

/**
 * Starts the scripted model server: a fake Anthropic Messages API that answers from a scenario.
 * Resolves once it listens; `url` then holds the address to give the CLI or the SDK.
 * @throws ScenarioValidationError when the scenario is invalid
 */
export async function startModelServer(options: ModelServerOptions): Promise<ModelServer> {
  const scenario = typeof options.scenario === 'string' ? await loadScenario(options.scenario) : validateScenario(options.scenario);
  const log = options.log ?? ((message: string) => process.stderr.write(`[model-server] ${message}\n`));
  const routes = new ModelRoutes(scenario, {
    log,
    maxBodyBytes: options.maxBodyBytes ?? 32 * 1024 * 1024,
    maxRecordedRequests: options.maxRecordedRequests ?? 1000,
    concurrentRequestsPerKey: options.concurrentRequestsPerKey,
    rateLimitRetryAfterSeconds: options.rateLimitRetryAfterSeconds,
  });
  const host = options.host ?? '127.0.0.1';
  const server = await listen(routes, log, { port: options.port ?? 0, host });
  const { port } = server.address() as AddressInfo;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${port}`,
    requests: () => routes.requests.copy(),
    setScenario: (next) => routes.setScenario(validateScenario(next)),
    reset: () => routes.reset(),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

/** Serves `routes` on `host:port`; resolves once listening. A request that fails is logged and answered 500. */
async function listen(routes: ModelRoutes, log: (message: string) => void, address: { port: number; host: string }): Promise<Server> {
  const server = createServer((req, res) => {
    const aborter = new AbortController();
    res.on('close', () => aborter.abort());
    routes.handle(req, res, aborter.signal).catch((error: unknown) => {
      if (error instanceof ClientGoneError) return;
      log(`internal error on ${req.method} ${req.url}: ${(error as Error).stack ?? String(error)}`);
      if (res.headersSent) res.destroy();
      else sendApiError(res, { status: 500, message: `model server internal error: ${(error as Error).message}` }, {});
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
