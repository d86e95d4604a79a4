import { describe, expect, test } from 'vitest';
import { findSealProblem, MAX_SEAL_AGE_MS, sealMessage } from '../../src/contracts/message-seal.js';

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
