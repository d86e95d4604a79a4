import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import type { Result } from 'execa';
import { DevServerError, DevServerErrorCode } from './dev-server-error.js';
import { canConnect } from './dev-server-ports.js';

/**
 * Polls the starting server until it serves `namespace`, and returns the connection that saw it.
 * @throws {DevServerError} EXITED (with the log's last error) when the process ends first, NOT_READY after `deadline`;
 *   both carry the tail of the log written since `logStart` in `details`.
 */
export async function waitUntilReady(
  address: string,
  namespace: string,
  port: number,
  deadline: number,
  getExit: () => Result | undefined,
  logFile: string,
  logStart: number,
): Promise<Connection> {
  let lastError: unknown;
  for (;;) {
    const exit = getExit();
    if (exit) {
      const tail = await readLogTail(logFile, logStart);
      throw new DevServerError(
        DevServerErrorCode.EXITED,
        `The Temporal dev server for ${address} exited (${exit.signal ?? `exit code ${exit.exitCode}`}) before it was ready: ${lastLogMessage(tail)}. ` +
          `Full log: ${logFile}. If a port is taken, choose another one (\`--port N\`, or port: 'auto').`,
        tail,
      );
    }
    if (Date.now() > deadline) {
      throw new DevServerError(
        DevServerErrorCode.NOT_READY,
        `The Temporal dev server at ${address} did not become ready in time (last error: ${lastError instanceof Error ? lastError.message : String(lastError)}). ` +
          `See ${logFile}; on a slow machine raise readyTimeoutMs.`,
        await readLogTail(logFile, logStart),
      );
    }
    // Probe the socket cheaply first: a gRPC channel that saw "connection refused" backs off for a second or more.
    if (await canConnect(port)) {
      const connection = Connection.lazy({ address, connectTimeout: Math.max(1_000, Math.min(5_000, deadline - Date.now())) });
      try {
        await connection.ensureConnected();
        await connection.workflowService.describeNamespace({ namespace });
        return connection;
      } catch (error) {
        lastError = error;
        await connection.close();
      }
    }
    await sleep(100);
  }
}

async function readLogTail(logFile: string, from: number): Promise<string> {
  const text = await readFile(logFile, 'utf8').catch(() => '');
  return text.slice(from).split('\n').filter(Boolean).slice(-20).join('\n');
}

/** The `msg` of the last ERROR line of the JSON log (the fatal one, when the server exits), else the last line. */
function lastLogMessage(tail: string): string {
  const lines = tail.split('\n').filter(Boolean);
  const parsed = lines.map((line) => {
    try {
      return JSON.parse(line) as { level?: unknown; msg?: unknown };
    } catch {
      return { msg: line };
    }
  });
  const fatal = parsed.findLast((entry) => entry.level === 'ERROR') ?? parsed.at(-1);
  return fatal === undefined ? '(the log is empty)' : String(fatal.msg ?? JSON.stringify(fatal));
}
