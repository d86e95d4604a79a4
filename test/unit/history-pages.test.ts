import { describe, expect, test } from 'vitest';
import { approximateBytes, HISTORY_PAGE_MAX_EVENTS, HISTORY_PAGE_TARGET_BYTES, pageSizeFor } from '../../src/library/history-pages.js';

describe('sizing pages of history', () => {
  test('asks for as many events as fit the target at the average event size, from one to the most per page', () => {
    expect(pageSizeFor(HISTORY_PAGE_TARGET_BYTES / 10)).toBe(10);
    expect(pageSizeFor(3 * HISTORY_PAGE_TARGET_BYTES)).toBe(1);
    expect(pageSizeFor(10)).toBe(HISTORY_PAGE_MAX_EVENTS);
    expect(pageSizeFor(0)).toBe(20);
    expect(pageSizeFor(1000, 50_000)).toBe(50);
  });

  test('counts the bytes and strings of an event, which is where its size on the wire is', () => {
    const event = { eventId: 5, activityTaskScheduledEventAttributes: { activityId: '1', input: { payloads: [{ metadata: { encoding: new Uint8Array(16) }, data: new Uint8Array(100_000) }] } } };
    const size = approximateBytes(event);
    expect(size).toBeGreaterThan(100_016);
    expect(size).toBeLessThan(100_100);
  });
});
