import type { ServerResponse } from 'node:http';
import { setTimeout as sleepTimer } from 'node:timers/promises';

/** Thrown when the client went away while a response was still being written. */
export class ClientGoneError extends Error {
  override readonly name = 'ClientGoneError';
  constructor() {
    super('the client closed the connection before the response was complete');
  }
}

/**
 * Writes `chunk`, waiting for the socket to drain when its buffer is full, so that a
 * response of hundreds of megabytes never sits in memory at once.
 * @throws ClientGoneError when the client disconnected
 */
export async function writeWithBackpressure(res: ServerResponse, chunk: string): Promise<void> {
  if (res.destroyed || res.writableEnded) throw new ClientGoneError();
  if (res.write(chunk)) return;
  await new Promise<void>((resolve, reject) => {
    const onDrain = (): void => {
      res.off('close', onClose);
      resolve();
    };
    const onClose = (): void => {
      res.off('drain', onDrain);
      reject(new ClientGoneError());
    };
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}

/**
 * Waits `ms` milliseconds, or less when `signal` aborts.
 * @throws ClientGoneError when `signal` aborts (the client went away)
 */
export async function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0) {
    if (signal.aborted) throw new ClientGoneError();
    return;
  }
  try {
    await sleepTimer(ms, undefined, { signal });
  } catch {
    throw new ClientGoneError();
  }
}

/** Starts a `text/event-stream` response with the headers the Messages API sends. */
export function startEventStream(res: ServerResponse, headers: Record<string, string>): void {
  res.writeHead(200, {
    ...headers,
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  // Send the headers now: clients start their timers (and our stall scenarios start) from here.
  res.flushHeaders();
}

/**
 * Writes one server-sent event in the Messages API's framing:
 * `event: <type>\ndata: <json with the same type>\n\n`.
 */
export async function writeEvent(res: ServerResponse, type: string, data: Record<string, unknown>): Promise<void> {
  await writeWithBackpressure(res, `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}
