import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { ApiKeyWindow } from './api-key-window.js';

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

/** A stage saw a 429/529 with `retry-after`: new calls on the key wait until `until`. @unit milliseconds since the epoch */
export const pauseKeySignal = defineSignal<[{ until: number }]>('pauseKey');

/** A request asks when it may start, under `perMinute`; the answer is a start time granted to it alone. */
export const reserveRequestUpdate = defineUpdate<{ startAt: number }, [{ perMinute: number }]>('reserveRequest');

/** The key's state, for people and tests. */
export const keyWindowQuery = defineQuery<ApiKeyWindow>('keyWindow');
