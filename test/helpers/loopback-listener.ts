import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** An HTTP service on this machine that a sandboxed agent may or may not reach: it records the paths it was asked for. */
export interface LoopbackListener {
  server: Server;
  /** The port on 127.0.0.1 (0 for a listener on a socket file). */
  port: number;
  /** The request paths, in the order they came. */
  hits: string[];
  close(): Promise<void>;
}

/** Listens where `bind` says (a port, a socket file) and answers every request with `body`. */
async function listen(body: string, bind: (server: Server, ready: () => void) => void): Promise<LoopbackListener> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(req.url ?? '');
    res.end(body);
  });
  await new Promise<void>((resolve) => bind(server, resolve));
  const address = server.address();
  return {
    server,
    port: typeof address === 'object' && address ? (address as AddressInfo).port : 0,
    hits,
    // Idle keep-alive connections would hold the close open.
    close: () => new Promise<void>((resolve) => (server.close(() => resolve()), server.closeAllConnections())),
  };
}

/** Listens on a free loopback port and answers every request with `body`. */
export function listenOnLoopback(body: string): Promise<LoopbackListener> {
  return listen(body, (server, ready) => server.listen(0, '127.0.0.1', ready));
}

/** Listens on the unix-domain socket `file` (as the Docker daemon or an SSH agent does) and answers with `body`. */
export function listenOnSocketFile(file: string, body: string): Promise<LoopbackListener> {
  return listen(body, (server, ready) => server.listen(file, ready));
}
