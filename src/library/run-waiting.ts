import { setTimeout as sleep } from 'node:timers/promises';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import type { RunState } from '../pipeline/run-state.js';
import { isTransient } from './follow-run.js';
import { ActivityStageCache, readRun, type RunSnapshot } from './run-reader.js';
import { RunFailedError, type RunFailureKind } from './errors.js';
import { toLibraryError } from './temporal-errors.js';
import type { EventsOptions } from './run-handle-options.js';
import { StageEventTracker, StageProgressTracker, type RunEvent } from './run-events.js';
import { HistoryWatch } from './history-watch.js';

/*
 * How a RunHandle waits on its run: through it, yielding what happens (events()), and to its end, for the result
 * (result()); both ride out a lost connection for about a minute.
 */

/** Polls in a row that may fail on a lost connection before `events()` gives up (about a minute). */
const MAX_FAILED_POLLS = 30;
/** Between two reads of a working agent's heartbeat by `events()`. @unit milliseconds */
const PROGRESS_INTERVAL_MS = 2_000;
/** After a failed read, before the next. @unit milliseconds */
const RETRY_DELAY_MS = 2_000;

/** Temporal's closed statuses and how the library names them. */
const FAILURE_KIND: Record<string, RunFailureKind> = { FAILED: 'failed', CANCELLED: 'cancelled', TERMINATED: 'terminated', TIMED_OUT: 'timed_out' };
/** Run statuses that name how a run failed (a run the pipeline's timeout ended is `timed_out` though Temporal says FAILED). */
const FAILURE_KINDS: ReadonlySet<string> = new Set<RunFailureKind>(['failed', 'cancelled', 'terminated', 'timed_out']);

/** What happens in run `id`, as it happens, until it ends: `RunHandle.events()`. */
export async function* runEvents(client: Client, id: string, address: string | undefined, options: EventsOptions): AsyncGenerator<RunEvent, void, undefined> {
  const tracker = new StageEventTracker();
  const progress = new StageProgressTracker();
  const cache = new ActivityStageCache();
  const watch = new HistoryWatch(client, id);
  let failedPolls = 0;
  while (!options.signal?.aborted) {
    let snapshot: RunSnapshot | undefined;
    try {
      snapshot = await readRun(client, id, cache);
      failedPolls = 0;
    } catch (err) {
      // A follow can last days: ride out a server restart or a network blip instead of giving up at once.
      if (!isTransient(err) || ++failedPolls > MAX_FAILED_POLLS) throw toLibraryError(err, address);
    }
    if (snapshot) {
      yield* tracker.next(snapshot.state);
      if (options.progress !== false) yield* progress.next(snapshot.state, snapshot.live);
      if (snapshot.executionStatus !== 'RUNNING') {
        const state = snapshot.state;
        // The snapshot's state is reconciled with the execution (run-end.ts): its status is how the run ended.
        yield { type: 'run_ended', runId: state.runId, state, status: state.status };
        return;
      }
    }
    await untilChange(watch, snapshot, options);
  }
}

/** Waits for the run's next change after `snapshot` (bounded while an agent works, so its progress is read). */
async function untilChange(watch: HistoryWatch, snapshot: RunSnapshot | undefined, options: EventsOptions): Promise<void> {
  const working = options.progress !== false && (snapshot?.live.size ?? 0) > 0;
  const maxMs = working ? (options.intervalMs ?? PROGRESS_INTERVAL_MS) : undefined;
  try {
    if (snapshot?.execution) return await watch.changeAfter(snapshot.execution, { maxMs, signal: options.signal });
  } catch {
    // The long-poll failed (a server restart, a lost connection): the next read tells whether that lasts.
  }
  await sleep(maxMs ?? RETRY_DELAY_MS, undefined, { signal: options.signal }).catch(() => undefined);
}

/**
 * Waits for run `id` to end: `RunHandle.result()`. `status` reads the run's state when it failed, for how it did.
 * @throws RunFailedError (with `type` and the final `state`) when it failed, was cancelled, terminated or timed out.
 */
export async function runResult(client: Client, id: string, address: string | undefined, status: () => Promise<RunSnapshot>): Promise<RunState> {
  for (let failedPolls = 0; ; ) {
    try {
      const state = (await client.workflow.getHandle(id).result()) as RunState;
      if (state.status !== 'completed') throw new RunFailedError(state.status === 'cancelled' ? 'cancelled' : 'failed', state);
      return state;
    } catch (err) {
      if (err instanceof WorkflowFailedError) {
        const { state, executionStatus } = await status();
        const kind = FAILURE_KINDS.has(state.status) ? (state.status as RunFailureKind) : (FAILURE_KIND[executionStatus] ?? 'failed');
        throw new RunFailedError(kind, state, { cause: err });
      }
      // The result is a long poll that may last days: a server restart must not end it.
      if (!isTransient(err) || ++failedPolls > MAX_FAILED_POLLS) throw toLibraryError(err, address);
      await sleep(RETRY_DELAY_MS);
    }
  }
}
