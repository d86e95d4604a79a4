import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { mergeWarnings, warningsBefore, withEarlierWarnings } from '../../src/activities/attempt/warnings.js';

describe('warnings carried across the attempts of a stage execution', () => {
  it('are read from heartbeat details and recorded failures, first seen first, each once', () => {
    const failure1 = { attempt: 1, warnings: ['RESPONSE_TRUNCATED: a'] };
    const heartbeat = { costUsd: 1, warnings: ['RESPONSE_TRUNCATED: a', 'b'] };
    expect(warningsBefore(failure1, undefined, null, 'text', { warnings: 'not a list' }, heartbeat)).toEqual(['RESPONSE_TRUNCATED: a', 'b']);
    expect(warningsBefore()).toEqual([]);
  });

  it('merge in order without repeats', () => {
    expect(mergeWarnings(['a'], undefined, ['b', 'a'], ['c'])).toEqual(['a', 'b', 'c']);
  });

  it('are added before a failure\'s own warnings in its details, keeping type, retryability and the rest', () => {
    const failure = ApplicationFailure.create({ type: 'OUTPUT_CONTRACT_VIOLATION', message: 'no report', nonRetryable: false, details: [{ costUsd: 0.1, warnings: ['own'] }, 'second'] });
    const carried = withEarlierWarnings(failure, ['earlier', 'own']);
    expect(carried).toMatchObject({ type: 'OUTPUT_CONTRACT_VIOLATION', message: 'no report', nonRetryable: false });
    expect(carried.details).toEqual([{ costUsd: 0.1, warnings: ['earlier', 'own'] }, 'second']);
    expect(withEarlierWarnings(failure, [])).toBe(failure);
  });
});
