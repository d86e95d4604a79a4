/*
 * The state one API key's limiter workflow keeps (see api-key-limit.ts), and the arithmetic on it. Pure, so the
 * workflow replays it deterministically and the unit tests check it without Temporal.
 */

import { MAX_PAUSE_MS, MAX_REQUESTS_PER_MINUTE, REQUEST_WINDOW_MS, type ApiKeyWindow } from '../contracts/api-key-limit-messages.js';

export function emptyWindow(): ApiKeyWindow {
  return { pausedUntil: 0, starts: [] };
}

/**
 * Extends the pause to `until` (a pause only ever grows, so reports arriving out of order cannot shorten it),
 * capped at `MAX_PAUSE_MS` from `now`. Returns true when the pause changed.
 */
export function extendPause(window: ApiKeyWindow, until: number, now: number): boolean {
  const capped = Math.min(until, now + MAX_PAUSE_MS);
  if (!Number.isFinite(capped) || capped <= window.pausedUntil) return false;
  window.pausedUntil = capped;
  return true;
}

/**
 * Grants one request a start time and records it: the earliest time, no earlier than `now`, the pause's end and the
 * last grant (first come, first served), at which fewer than `perMinute` grants lie in the window before it.
 * @returns the start time granted @unit milliseconds since the epoch
 */
export function reserveStart(window: ApiKeyWindow, now: number, perMinute: number): number {
  window.starts = window.starts.filter((start) => start > now - REQUEST_WINDOW_MS);
  const { starts } = window;
  let at = Math.max(now, window.pausedUntil, starts.length > 0 ? starts[starts.length - 1] : 0);
  // Grants are ascending, so the one `perMinute` back from the end bounds the window: wait until it has left.
  if (starts.length >= perMinute) at = Math.max(at, starts[starts.length - perMinute] + REQUEST_WINDOW_MS);
  starts.push(at);
  // Only the last `perMinute` grants can ever bound a later one (a smaller limit from another worker included).
  if (starts.length > MAX_KEPT_STARTS) starts.splice(0, starts.length - MAX_KEPT_STARTS);
  return at;
}

/** Grants kept at most, whatever the limit: the state stays small in history and across continue-as-new. */
const MAX_KEPT_STARTS = MAX_REQUESTS_PER_MINUTE;

/** When the key has nothing left to remember: its pause over and its last grant out of the window. */
export function idleAt(window: ApiKeyWindow): number {
  const last = window.starts.length > 0 ? window.starts[window.starts.length - 1] + REQUEST_WINDOW_MS : 0;
  return Math.max(window.pausedUntil, last);
}
