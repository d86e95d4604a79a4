import http from 'node:http';
import net from 'node:net';
import type { PipelineMetrics } from './metrics.js';

/** `host:port` parsed from `AGENT_PIPELINE_METRICS`. */
export interface MetricsAddress {
  host: string;
  port: number;
}

/**
 * Parses `AGENT_PIPELINE_METRICS` (`host:port`, `[v6]:port`, or `:port` / `port` for the loopback interface only:
 * the endpoint has no authentication, so it is reachable from other hosts only when a host says so, e.g. `0.0.0.0:9464`).
 * @throws naming the variable, the value and the form expected
 */
export function parseMetricsAddress(value: string): MetricsAddress {
  const match = /^(?:(?:\[([^\]]+)\]|([^:]*)):)?(\d{1,5})$/.exec(value.trim());
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65_535) {
    throw new Error(`AGENT_PIPELINE_METRICS=${value} is not host:port; use e.g. 127.0.0.1:9464 (this host only) or 0.0.0.0:9464 (all interfaces)`);
  }
  return { host: match[1] ?? (match[2] || '127.0.0.1'), port };
}

/**
 * A free TCP port on the loopback interface (for the SDK's own exporter that only this process reads, a dev server's
 * port), kept from the system's next picks for a while: it is listened on, connected to, and closed from the listening
 * side first, which leaves that side in TIME_WAIT (60 s on Linux). The system then hands it to no bind(:0), while an
 * explicit bind (Node and Go set SO_REUSEADDR) still takes it. The Temporal CLI reserves its own ports so; a port only
 * listened on and closed came back to the dev server's internal services a moment later, which then exited.
 */
export async function freeLoopbackPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as net.AddressInfo;
  try {
    const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
    const client = net.connect({ port, host: '127.0.0.1' });
    const clientClosed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    await new Promise<void>((resolve, reject) => client.once('connect', resolve).once('error', reject));
    // The listening side closes first, so its end of the connection, the one on `port`, waits in TIME_WAIT.
    (await accepted).end();
    await clientClosed;
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
  return port;
}

/** How long a scrape waits for the SDK's exporter. @unit milliseconds */
const CORE_SCRAPE_TIMEOUT_MS = 5_000;

/**
 * Serves `/metrics`: the project's metrics followed by the Temporal SDK's worker metrics, which the SDK's native
 * runtime exports on a loopback port (`coreUrl`). One endpoint per worker, so a scrape config needs one target.
 */
export async function serveMetrics(address: MetricsAddress, metrics: PipelineMetrics, coreUrl: string): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || !req.url?.startsWith('/metrics')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('metrics are at /metrics\n');
      return;
    }
    void Promise.all([metrics.text(), fetchCoreMetrics(coreUrl)]).then(
      ([own, core]) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(`${own}\n${core}`),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${(err as Error).message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(new Error(`AGENT_PIPELINE_METRICS: cannot listen on ${address.host}:${address.port} (${err.code ?? err.message})`, { cause: err })),
    );
    server.listen(address.port, address.host, resolve);
  });
  server.unref();
  return server;
}

/** The SDK's exposition; empty (with a comment saying why) when it cannot be read, so our metrics still go out. */
async function fetchCoreMetrics(url: string): Promise<string> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(CORE_SCRAPE_TIMEOUT_MS) });
    return await response.text();
  } catch (err) {
    return `# Temporal SDK metrics unavailable: ${(err as Error).message}\n`;
  }
}
