import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';

/*
 * The messages of an API key's limiter workflow (api-key-limit.ts), apart from it so that the worker's side
 * (src/activities/api-key/) can send them without loading workflow code.
 */

/** The workflow type, as the worker's side starts it by name. */
export const API_KEY_LIMIT_WORKFLOW_TYPE = 'apiKeyLimitWorkflow';

/** Memo field holding the key's `pausedUntil`, which workers read with describe(), a call no worker has to answer. */
export const PAUSED_UNTIL_MEMO = 'pausedUntil';

/** What the workflow starts from: the key's id (a hash, never the key), and its state when continued as new. */
export interface ApiKeyLimitInput {
  keyId: string;
  window?: ApiKeyWindow;
  /** Continue as new past this many history events (tests set it low). @default 2000 */
  continueAsNewAfterEvents?: number;
}

/**
 * A stage saw a 429/529 with `retry-after`: new calls on the key wait until `until`. @unit milliseconds since the epoch
 * Sent by workers of releases before issue 33; a signal cannot be refused, so workers now send {@link reportPauseUpdate}
 * and the workflow keeps this handler only for histories and workers that still send it (ignoring unauthenticated ones).
 */
export const pauseKeySignal = defineSignal<[{ until: number }]>('pauseKey');

/**
 * A stage saw a 429/529 with `retry-after`: new calls on the key wait until `until` (capped at MAX_PAUSE_MS from now).
 * An update so that its validator can refuse a pause no worker of the deployment reported. @unit milliseconds since the epoch
 */
export const reportPauseUpdate = defineUpdate<void, [{ until: number }]>('reportPause');

/** A request asks when it may start, under `perMinute`; the answer is a start time granted to it alone. */
export const reserveRequestUpdate = defineUpdate<{ startAt: number }, [{ perMinute: number }]>('reserveRequest');

/** The key's state, for people and tests. */
export const keyWindowQuery = defineQuery<ApiKeyWindow>('keyWindow');

/** The request window of `requestsPerMinute`. @unit milliseconds */
export const REQUEST_WINDOW_MS = 60_000;

/** The highest `requestsPerMinute` a worker may set: each request is one update of the key's workflow. */
export const MAX_REQUESTS_PER_MINUTE = 1_000;

/** The longest pause one `retry-after` may impose, so a wrong header cannot stop a key for hours. @unit milliseconds */
export const MAX_PAUSE_MS = 10 * 60_000;

/** A key's shared state: a pause after a 429/529, and the start times granted within the last window. */
export interface ApiKeyWindow {
  /** New model calls wait until then. @unit milliseconds since the epoch (0: never paused) */
  pausedUntil: number;
  /** Start times granted to requests, ascending; only those of the last window (and later) are kept. @unit milliseconds since the epoch */
  starts: number[];
}
