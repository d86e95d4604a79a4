import type { Payload, PayloadCodec } from '@temporalio/common';
import { timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodePayloads, encodePayloads } from './data-converter.js';

/*
 * Temporal's remote codec protocol, for the Web UI (and `temporal --codec-endpoint`): `POST /decode` and
 * `POST /encode` take `{"payloads": [...]}` (payloads in protobuf JSON: metadata values and data in base64) and answer
 * the same shape, run through the codecs. The UI calls it from the person's browser, with the `X-Namespace` header and
 * a CORS preflight; only the configured origin is answered with CORS headers. With a token, every request must carry
 * `Authorization: Bearer <token>`. Every request must name, in its Host header, a host the server was started for
 * (`allowedHosts`): a web page whose name was pointed at 127.0.0.1 (DNS rebinding) sends its own name there and gets
 * 421, as does a request relayed by a proxy that names the host it dialled (the sandbox's proxy does).
 */

export interface CodecServerOptions {
  codecs: readonly PayloadCodec[];
  /** @default 8888 */
  port?: number;
  /** @default 127.0.0.1: only this host can reach the keys' decryptions unless told otherwise */
  host?: string;
  /** The Web UI's origin (`http://localhost:8080`), the one origin CORS allows; none when left out. */
  origin?: string;
  /** A bearer token every request must carry. */
  token?: string;
  /**
   * The names the server answers to in the Host header, each `host` or `host:port` (without a port: the port it listens
   * on); others get 421. `localhost`, `127.0.0.1` and `[::1]` at its port always, and `host` when it names one address.
   * @default none besides those
   */
  allowedHosts?: readonly string[];
  /** Largest request body. @unit bytes @default 16 MiB */
  maxBodyBytes?: number;
}

export interface CodecServer {
  /** `http://host:port` */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/** A payload as protobuf JSON carries it. */
interface JsonPayload {
  metadata?: Record<string, string>;
  data?: string;
}

const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function fromJson(payload: JsonPayload): Payload {
  if (typeof payload !== 'object' || payload === null) throw new HttpError(400, 'each payload must be an object');
  const metadata = Object.fromEntries(Object.entries(payload.metadata ?? {}).map(([k, v]) => [k, Buffer.from(String(v), 'base64')]));
  return { metadata, data: Buffer.from(payload.data ?? '', 'base64') };
}

function toJson(payload: Payload): JsonPayload {
  const metadata = Object.fromEntries(Object.entries(payload.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
  return { metadata, data: Buffer.from(payload.data ?? new Uint8Array(0)).toString('base64') };
}

async function readBody(request: http.IncomingMessage, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new HttpError(413, `the request body is over ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** True when the request carries the token (compared in constant time). */
function authorized(request: http.IncomingMessage, token: string | undefined): boolean {
  if (!token) return true;
  const given = Buffer.from(request.headers.authorization ?? '');
  const wanted = Buffer.from(`Bearer ${token}`);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

function corsHeaders(request: http.IncomingMessage, origin: string | undefined): Record<string, string> {
  if (!origin || request.headers.origin !== origin) return {};
  return {
    'Access-Control-Allow-Origin': origin,
    'Access-Control-Allow-Methods': 'POST, OPTIONS',
    'Access-Control-Allow-Headers': 'Content-Type, X-Namespace, Authorization',
    'Access-Control-Allow-Credentials': 'true',
    'Access-Control-Max-Age': '600',
    Vary: 'Origin',
  };
}

/** Addresses that mean "every interface": a Host header never names them. */
const ANY_ADDRESS = new Set(['0.0.0.0', '::', '[::]', '']);

/** `host:port` as a Host header names it: lower case, an IPv6 address in brackets, the port always written. */
function hostKey(name: string, defaultPort: number): string {
  let host = name.trim().toLowerCase();
  let port = String(defaultPort);
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    if (host.slice(end + 1).startsWith(':')) port = host.slice(end + 2);
    host = host.slice(0, end + 1);
  } else if (host.includes(':') && host.indexOf(':') === host.lastIndexOf(':')) {
    [host, port] = host.split(':') as [string, string];
  } else if (host.includes(':')) {
    // A bare IPv6 address, as `--host ::1` names it.
    host = `[${host}]`;
  }
  return `${host.replace(/\.$/, '')}:${port}`;
}

/** The Host header values the server answers: the defaults and the configured names, at the port it listens on. */
export function allowedHostKeys(options: Pick<CodecServerOptions, 'host' | 'allowedHosts'>, port: number): Set<string> {
  const listening = options.host ?? '127.0.0.1';
  const names = ['localhost', '127.0.0.1', '[::1]', ...(ANY_ADDRESS.has(listening) ? [] : [listening]), ...(options.allowedHosts ?? [])];
  return new Set(names.map((name) => hostKey(name, port)));
}

async function handle(request: http.IncomingMessage, options: CodecServerOptions, hosts: ReadonlySet<string>): Promise<{ status: number; body?: unknown }> {
  // Before anything else, the preflight included: a browser talking to another name than ours is a page that rebound
  // its own name to this address, and a proxy's relayed request names what it dialled.
  const host = request.headers.host;
  if (!host || !hosts.has(hostKey(host, 80))) {
    throw new HttpError(421, `this codec server answers only requests for ${[...hosts].join(', ')}; start it with --allowed-host NAME for a name the Web UI uses`);
  }
  // A preflight carries no credentials by the Fetch standard: it is answered before the token is checked.
  if (request.method === 'OPTIONS') return { status: 204 };
  if (!authorized(request, options.token)) throw new HttpError(401, 'missing or wrong bearer token');
  const route = new URL(request.url ?? '/', 'http://codec').pathname.replace(/\/+$/, '');
  if (route !== '/encode' && route !== '/decode') throw new HttpError(404, 'the codec server answers POST /encode and POST /decode');
  if (request.method !== 'POST') throw new HttpError(405, `${route} takes POST`);
  let body: { payloads?: unknown };
  try {
    body = JSON.parse((await readBody(request, options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES)).toString('utf8')) as { payloads?: unknown };
  } catch (err) {
    throw err instanceof HttpError ? err : new HttpError(400, 'the body is not JSON');
  }
  if (!Array.isArray(body?.payloads)) throw new HttpError(400, 'the body must be {"payloads": [...]}');
  const payloads = (body.payloads as JsonPayload[]).map(fromJson);
  try {
    const result = route === '/encode' ? await encodePayloads(options.codecs, payloads) : await decodePayloads(options.codecs, payloads);
    return { status: 200, body: { payloads: result.map(toJson) } };
  } catch (err) {
    // The codec's own message: which key id is missing or does not match; never a key or a payload.
    throw new HttpError(400, (err as Error).message);
  }
}

/** Starts the codec server; resolves once it listens. */
export async function startCodecServer(options: CodecServerOptions): Promise<CodecServer> {
  // Known once the server listens (port 0 picks one); until then no Host is accepted.
  let hosts: ReadonlySet<string> = new Set();
  const server = http.createServer((request, response) => {
    const cors = corsHeaders(request, options.origin);
    handle(request, options, hosts).then(
      ({ status, body }) => {
        response.writeHead(status, { ...cors, ...(body ? { 'Content-Type': 'application/json' } : {}) });
        response.end(body ? JSON.stringify(body) : undefined);
      },
      (err: unknown) => {
        const status = err instanceof HttpError ? err.status : 500;
        response.writeHead(status, { ...cors, 'Content-Type': 'application/json' });
        response.end(JSON.stringify({ error: err instanceof HttpError ? err.message : 'internal error' }));
      },
    );
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8888, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  hosts = allowedHostKeys(options, port);
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // The UI keeps its connections alive; they would hold close() open.
        server.closeAllConnections();
      }),
  };
}
