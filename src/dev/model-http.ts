import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApiErrorSpec, Scenario } from './scenario.js';

/*
 * HTTP plumbing of the scripted model server that mirrors the real API: error bodies and headers,
 * body size limit, authentication, and what of a request is safe to record.
 */

const SECRET_HEADERS = new Set(['x-api-key', 'authorization', 'proxy-authorization', 'cookie', 'set-cookie']);
const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error', 401: 'authentication_error', 402: 'billing_error', 403: 'permission_error',
  404: 'not_found_error', 413: 'request_too_large', 429: 'rate_limit_error', 500: 'api_error', 529: 'overloaded_error',
};

/** Thrown while reading a request that must be refused with an API error. */
export class RequestRefusedError extends Error {
  constructor(readonly spec: ApiErrorSpec) {
    super(spec.message);
  }
}

/** Answers with an error in the API's shape: `{"type":"error","error":{"type","message"}}`, plus its headers. */
export function sendApiError(res: ServerResponse, spec: ApiErrorSpec, headers: Record<string, string>): void {
  const type = spec.type ?? ERROR_TYPES[spec.status] ?? (spec.status >= 500 ? 'api_error' : 'invalid_request_error');
  const body = JSON.stringify({ type: 'error', error: { type, message: spec.message ?? `scripted ${spec.status} ${type}` } });
  const extra: Record<string, string> = {};
  if (spec.retryAfter !== undefined) extra['retry-after'] = String(spec.retryAfter);
  if (spec.shouldRetry !== undefined) extra['x-should-retry'] = String(spec.shouldRetry);
  res.writeHead(spec.status, {
    ...headers,
    ...extra,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/**
 * Reads the whole request body as UTF-8.
 * @throws RequestRefusedError (413 `request_too_large`) past `limit` bytes, as the real API refuses big requests
 */
export async function readBody(req: IncomingMessage, limit: number): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of req as AsyncIterable<Buffer>) {
    size += part.length;
    if (size > limit) {
      const message = `Request exceeds the maximum allowed number of bytes (${limit}).`;
      throw new RequestRefusedError({ status: 413, type: 'request_too_large', message });
    }
    parts.push(part);
  }
  return Buffer.concat(parts).toString('utf8');
}

/** The request's headers with secrets (`x-api-key`, `authorization`, cookies) replaced by `<redacted>`. */
export function redactHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    out[name] = SECRET_HEADERS.has(name) ? '<redacted>' : Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** The API key the request presents: `x-api-key`, else a bearer token. */
export function presentedKey(req: IncomingMessage): string | undefined {
  const key = req.headers['x-api-key'];
  if (typeof key === 'string' && key !== '') return key;
  const match = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
  return match?.[1];
}

/** The 401 to answer with when the request's key is missing, or is not the scenario's `requireApiKey`. */
export function authError(req: IncomingMessage, scenario: Scenario): ApiErrorSpec | undefined {
  const key = presentedKey(req);
  if (key === undefined) return { status: 401, message: 'x-api-key header is required' };
  if (scenario.requireApiKey !== undefined && key !== scenario.requireApiKey) {
    return { status: 401, message: 'invalid x-api-key' };
  }
  return undefined;
}
