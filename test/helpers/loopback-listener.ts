import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** An HTTP service on 127.0.0.1 that a sandboxed agent may or may not reach: it records the paths it was asked for. */
export interface LoopbackListener {
  server: Server;
  port: number;
  /** The request paths, in the order they came. */
  hits: string[];
  close(): Promise<void>;
}

/** Listens on a free loopback port and answers every request with `body`. */
export async function listenOnLoopback(body: string): Promise<LoopbackListener> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(req.url ?? '');
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    hits,
    // Idle keep-alive connections would hold the close open.
    close: () => new Promise<void>((resolve) => (server.close(() => resolve()), server.closeAllConnections())),
  };
}
