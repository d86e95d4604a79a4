import { describe, expect, it } from 'vitest';
import { ApplicationFailure } from '@temporalio/common';
import { addSpending, spentBefore, withEarlierSpending } from '../../src/activities/attempt/spending.js';

describe('spentBefore', () => {
  it('is nothing without records, and ignores records that carry no figures', () => {
    expect(spentBefore()).toEqual({ costUsd: 0, usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 } });
    expect(spentBefore(undefined, null, 'text', { costUsd: 'a lot' }, { costUsd: Number.NaN })).toEqual({ costUsd: 0, usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 } });
  });

  it('takes the larger figure of records of the same running total', () => {
    const heartbeat = { costUsd: 0.4, usage: { inputTokens: 900, outputTokens: 50 } };
    const failure = { costUsd: 0.5, usage: { inputTokens: 800, outputTokens: 70 } };
    expect(spentBefore(heartbeat, failure)).toEqual({ costUsd: 0.5, usage: { inputTokens: 900, outputTokens: 70, cacheReadTokens: 0, cacheWriteTokens: 0 } });
  });

  it('carries cache reads and writes like the other token counts', () => {
    const heartbeat = { costUsd: 0.1, usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 9_000, cacheWriteTokens: 100 } };
    const failure = { costUsd: 0.1, usage: { inputTokens: 10, outputTokens: 5, cacheWriteTokens: 2_000 } };
    expect(spentBefore(heartbeat, failure).usage).toEqual({ inputTokens: 10, outputTokens: 5, cacheReadTokens: 9_000, cacheWriteTokens: 2_000 });
    expect(addSpending({ usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 1_000 } }, spentBefore(heartbeat)).usage).toEqual({
      inputTokens: 11,
      outputTokens: 6,
      cacheReadTokens: 10_000,
      cacheWriteTokens: 100,
    });
  });
});

describe('addSpending', () => {
  const earlier = { costUsd: 0.25, usage: { inputTokens: 100, outputTokens: 10 } };

  it('adds the earlier attempts to a value of its own', () => {
    expect(addSpending({ costUsd: 0.5, usage: { inputTokens: 1, outputTokens: 2 }, turns: 3 }, earlier)).toEqual({
      costUsd: 0.75,
      usage: { inputTokens: 101, outputTokens: 12, cacheReadTokens: 0, cacheWriteTokens: 0 },
      turns: 3,
    });
  });

  it('keeps an unknown cost unknown, and gives missing figures the earlier ones', () => {
    expect(addSpending({ costUsd: null, usage: { inputTokens: 1, outputTokens: 2 } }, earlier).costUsd).toBeNull();
    expect(addSpending({}, earlier)).toEqual({ ...earlier, usage: { ...earlier.usage, cacheReadTokens: 0, cacheWriteTokens: 0 } });
  });

  it('returns the value itself when nothing was spent before', () => {
    const value = { costUsd: 1 };
    expect(addSpending(value, spentBefore())).toBe(value);
  });
});

describe('withEarlierSpending', () => {
  const earlier = { costUsd: 0.25, usage: { inputTokens: 100, outputTokens: 10 } };

  it('adds the earlier attempts to the details the workflow reads, keeping everything else of the failure', () => {
    const failure = ApplicationFailure.create({ type: 'RATE_LIMITED', message: 'slow down', nextRetryDelay: 7_000, details: [{ costUsd: 0.5, sessionId: 's' }, 'more'] });
    const carried = withEarlierSpending(failure, earlier);
    expect(carried).toMatchObject({ type: 'RATE_LIMITED', message: 'slow down', nonRetryable: false, nextRetryDelay: 7_000 });
    expect(carried.details).toEqual([{ costUsd: 0.75, sessionId: 's', usage: { inputTokens: 100, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 } }, 'more']);
  });

  it('gives a failure without details the earlier spending, and leaves one alone when nothing was spent', () => {
    const bare = ApplicationFailure.create({ type: 'CLI_CRASHED', message: 'gone', nonRetryable: true });
    expect(withEarlierSpending(bare, earlier).details).toEqual([{ ...earlier, usage: { ...earlier.usage, cacheReadTokens: 0, cacheWriteTokens: 0 } }]);
    expect(withEarlierSpending(bare, spentBefore())).toBe(bare);
  });
});
