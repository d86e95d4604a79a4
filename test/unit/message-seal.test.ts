import { describe, expect, test } from 'vitest';
import { findReplayProblem, findSealProblem, MAX_SEAL_AGE_MS, sealClock, sealMessage, sealTimeOf } from '../../src/contracts/message-seal.js';

describe("a key holder's sealed message", () => {
  const sentAt = 1_000_000;
  const sealed = sealMessage({ holder: 'h' }, 'acquireLease', 'wf-1', sentAt);

  test('is taken as the message, at the workflow, it was sent as', () => {
    expect(findSealProblem(sealed, 'acquireLease', 'wf-1', sentAt + 1_000)).toBeUndefined();
  });

  test('is refused as another message or at another workflow, at any age', () => {
    expect(findSealProblem(sealed, 'releaseLease', 'wf-1', sentAt)).toBe('it was sent as "acquireLease", not releaseLease');
    expect(findSealProblem(sealed, 'releaseLeaseSignal', 'wf-1')).toMatch(/not releaseLeaseSignal/);
    expect(findSealProblem(sealed, 'acquireLease', 'wf-2', sentAt)).toBe('it was sent to another workflow');
  });

  test('is refused as an update once it is older than the limit, and taken as a signal whatever its age', () => {
    expect(findSealProblem(sealed, 'acquireLease', 'wf-1', sentAt + MAX_SEAL_AGE_MS + 1)).toBe('it was sent more than 15 minutes from now');
    expect(findSealProblem(sealed, 'acquireLease', 'wf-1')).toBeUndefined();
  });

  test('without a seal (a worker of an earlier release) is taken; a seal of the wrong shape is not', () => {
    expect(findSealProblem({ holder: 'h' }, 'releaseLease', 'wf-1', sentAt)).toBeUndefined();
    expect(findSealProblem({ holder: 'h', sealedFor: 'x' }, 'releaseLease', 'wf-1', sentAt)).toBe('its seal is not an object');
  });
});

describe('copies of a sealed message', () => {
  test('a message sealed no later than the newest taken from its sender is a copy; a later one, or one without a time, is not', () => {
    expect(findReplayProblem(100, 100)).toMatch(/copy of a message already taken/);
    expect(findReplayProblem(99, 100)).toMatch(/copy/);
    expect(findReplayProblem(101, 100)).toBeUndefined();
    expect(findReplayProblem(100, undefined)).toBeUndefined();
    expect(findReplayProblem(undefined, 100)).toBeUndefined();
  });

  test('the seal time is read from a well-formed seal only', () => {
    expect(sealTimeOf(sealMessage({ holder: 'h' }, 'renewLease', 'wf', 42))).toBe(42);
    expect(sealTimeOf({ holder: 'h' })).toBeUndefined();
    expect(sealTimeOf({ sealedFor: { sentAt: 'soon' } })).toBeUndefined();
    expect(sealTimeOf(null)).toBeUndefined();
  });

  test("a sender's seal clock never gives a time twice nor goes back", () => {
    const times = [1_000, 1_000, 990, 2_000];
    const next = sealClock(() => times.shift()!);
    expect([next(), next(), next(), next()]).toEqual([1_000, 1_001, 1_002, 2_000]);
  });
});
