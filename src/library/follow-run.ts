import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { GRPC_STATUS, grpcErrorOf } from '../grpc-errors.js';
import { ActivityStageCache, readRun, type RunSnapshot } from './run-reader.js';

export interface FollowOptions {
  /** Called with every fresh snapshot, the last one included. */
  onSnapshot(snapshot: RunSnapshot): void;
  /** Stops following (Ctrl-C); the run itself goes on. */
  signal?: AbortSignal;
  /** @unit milliseconds @default 1000 */
  intervalMs?: number;
  /** Told when the server did not answer a poll; following goes on. */
  onRetry?(reason: string): void;
}

/** Polls in a row that may fail on a lost connection before following gives up (about a minute). */
const MAX_FAILED_POLLS = 30;
/** gRPC UNAVAILABLE and DEADLINE_EXCEEDED: the server restarts, the network blips. */
const TRANSIENT_CODES = new Set<number>([GRPC_STATUS.UNAVAILABLE, GRPC_STATUS.DEADLINE_EXCEEDED]);

/** True for errors a lost connection or a restarting server causes; the request may be tried again. */
export function isTransient(err: unknown): boolean {
  const code = grpcErrorOf(err)?.code;
  return code !== undefined && TRANSIENT_CODES.has(code);
}

/** How following ended: the run closed, or the person stopped watching. */
export interface FollowOutcome {
  snapshot: RunSnapshot;
  interrupted: boolean;
}

/**
 * Follows a run until Temporal reports it closed, or until `signal` aborts. Polls (the status query, or history when
 * no worker answers): cheap for the server, and it works for runs started elsewhere and with workers coming and going.
 */
export async function followRun(client: Client, runId: string, options: FollowOptions): Promise<FollowOutcome> {
  const cache = new ActivityStageCache();
  let last: RunSnapshot | undefined;
  let failedPolls = 0;
  for (;;) {
    try {
      last = await readRun(client, runId, cache);
      failedPolls = 0;
      options.onSnapshot(last);
      if (last.executionStatus !== 'RUNNING') return { snapshot: last, interrupted: false };
    } catch (err) {
      // A watch can last hours: ride out a server restart or a network blip instead of giving up at once.
      if (!isTransient(err) || !last || ++failedPolls > MAX_FAILED_POLLS) throw err;
      options.onRetry?.((err as Error).message);
    }
    try {
      await sleep(options.intervalMs ?? 1_000, undefined, { signal: options.signal });
    } catch {
      return { snapshot: last, interrupted: true };
    }
  }
}

/** An AbortSignal that fires on the first Ctrl-C; `dispose` removes the handler. */
export function interruptSignal(): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onInterrupt = (): void => controller.abort();
  process.once('SIGINT', onInterrupt);
  return { signal: controller.signal, dispose: () => process.off('SIGINT', onInterrupt) };
}
