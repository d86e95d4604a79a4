import net from 'node:net';
import { Connection } from '@temporalio/client';
import { DevServerError, DevServerErrorCode } from './dev-server-error.js';
import { freeLoopbackPort } from '../telemetry/metrics-server.js';

/** The dev server listens on loopback only: its gRPC port and its Web UI. */
export const DEV_SERVER_HOST = '127.0.0.1';

/** @throws {DevServerError} INVALID_PORT, naming the option, when `port` is not a TCP port number */
export function assertValidPort(option: string, port: number): void {
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new DevServerError(DevServerErrorCode.INVALID_PORT, `${option} ${port} is not a TCP port; use an integer from 1 to 65535 (or port: 'auto').`);
  }
}

/**
 * Checks that nothing listens on the ports the server is to take, before it is spawned, so the error names the port.
 * @throws {DevServerError} ALREADY_RUNNING when a Temporal server answers on `port`, PORT_IN_USE when another program holds either port
 */
export async function assertPortsFree(address: string, port: number, uiPort: number | undefined): Promise<void> {
  if (!(await isPortFree(port))) {
    if (await isTemporalServer(address)) {
      throw new DevServerError(
        DevServerErrorCode.ALREADY_RUNNING,
        `A Temporal server is already running at ${address}. Use it (TEMPORAL_ADDRESS=${address}), stop it, or choose another port (\`--port N\`, or port: 'auto').`,
      );
    }
    throw new DevServerError(DevServerErrorCode.PORT_IN_USE, `Port ${port} on ${DEV_SERVER_HOST} is in use by another program. Stop it or choose another port (\`--port N\`, or port: 'auto').`);
  }
  if (uiPort !== undefined && !(await isPortFree(uiPort))) {
    throw new DevServerError(
      DevServerErrorCode.PORT_IN_USE,
      `Web UI port ${uiPort} on ${DEV_SERVER_HOST} is in use by another program. Choose another UI port (uiPort), or run headless.`,
    );
  }
}

async function isTemporalServer(address: string): Promise<boolean> {
  // Not Connection.connect(): when it fails it leaves its channel open, holding a socket to whatever listens.
  const connection = Connection.lazy({ address, connectTimeout: 2_000 });
  try {
    await connection.ensureConnected();
    return true;
  } catch {
    return false;
  } finally {
    await connection.close();
  }
}

function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (error: NodeJS.ErrnoException) => (error.code === 'EADDRINUSE' || error.code === 'EACCES' ? resolve(false) : reject(error)));
    server.listen(port, DEV_SERVER_HOST, () => server.close(() => resolve(true)));
  });
}

/** A port that was free a moment ago (the system's pick), for `port: 'auto'`. */
export function pickFreePort(): Promise<number> {
  // The dev server listens on the loopback interface (DEV_SERVER_HOST), where the metrics exporter's port is picked too.
  return freeLoopbackPort();
}

/** Whether something accepts TCP connections on `port`: a cheap probe before a gRPC connection is tried. */
export function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: DEV_SERVER_HOST });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
