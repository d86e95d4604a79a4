import { ApplicationFailure, DefaultFailureConverter, defaultPayloadConverter } from '@temporalio/common';
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { failureTypeForStatus, stageFailure } from '../../src/activities/failures.js';
import { FAILURES, type FailureType } from '../../src/failure-types.js';
import { redactSecrets, SecretRegistry } from '../../src/activities/secrets.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

const SECRET = 'sk-ant-unit-test-SECRET-0123456789';
/** The worker's secrets; an activity runs inside them (see `createActivities`). */
const secrets = new SecretRegistry([SECRET, 'short']);

describe('the failure catalogue', () => {
  it('documents every type with "Thrown when…" (or "Used for…") in one table', async () => {
    const source = await readFile(`${PROJECT_ROOT}src/failure-types.ts`, 'utf8');
    for (const type of Object.keys(FAILURES)) {
      const doc = new RegExp(`/\\*\\*\\s*(?:\\*\\s*)?(Thrown when|Used for)[^]*?\\*/\\s*${type}:`);
      expect(source, `${type} needs a doc comment`).toMatch(doc);
    }
  });

  it('lists the non-retryable types DESIGN.md names, and only those', () => {
    // Plus BUNDLE_INVALID: a run whose carried files do not match their hashes cannot be mended by a retry; and
    // OUTPUT_TOO_LARGE: the same prompt gives an answer as large again; and
    // SANDBOX_UNAVAILABLE: a worker without its sandbox stays without it until someone installs it;
    // SANDBOX_OPT_OUT_REFUSED: the worker's mode does not change between attempts; and
    // PERMISSION_TIMED_OUT and REJECTED: a person's decision (or its deadline, `onTimeout: fail`) ended the attempt; and
    // NESTED_REPOSITORY: the repository the agent left in the worktree is still there on a retry.
    const nonRetryable = (Object.keys(FAILURES) as FailureType[]).filter((type) => FAILURES[type].nonRetryable);
    expect(new Set(nonRetryable)).toEqual(
      new Set(['CONFIG_INVALID', 'FILE_NOT_FOUND', 'BUNDLE_INVALID', 'INPUT_NOT_FOUND', 'TEMPLATE_VARIABLE_UNKNOWN', 'CLI_NOT_INSTALLED', 'API_KEY_MISSING', 'API_KEY_REJECTED', 'INVALID_REQUEST', 'BUDGET_EXCEEDED', 'AGENT_REPORTED_FAILURE', 'OUTPUT_TOO_LARGE', 'SANDBOX_UNAVAILABLE', 'SANDBOX_OPT_OUT_REFUSED', 'PERMISSION_TIMED_OUT', 'REJECTED', 'NESTED_REPOSITORY']),
    );
  });

  it('builds messages that say what failed, in which stage, and what to do', () => {
    for (const type of Object.keys(FAILURES) as FailureType[]) {
      const failure = stageFailure({ type, stageId: 'build', message: 'something specific broke' });
      expect(failure).toBeInstanceOf(ApplicationFailure);
      expect(failure.type).toBe(type);
      expect(failure.nonRetryable).toBe(FAILURES[type].nonRetryable);
      expect(failure.message).toBe(`[${type}] stage build: something specific broke; ${FAILURES[type].hint}`);
    }
  });

  it('never promises a retry: a hint that mentions one says it depends on the stage\'s `retries`', () => {
    // A stage with `retries: 0` gets no second attempt; "Temporal retries the attempt" would be false there.
    for (const [type, { hint }] of Object.entries(FAILURES)) {
      if (/retr(y|ies|ied)/i.test(hint) && !/`retries`|retry the stage|retries:|agent-pipeline retry/.test(hint)) throw new Error(`${type}: ${hint}`);
      expect(hint).not.toMatch(/Temporal retries/);
    }
  });

  it('keeps the cause, honours a retry delay and lets a caller force retryability', () => {
    const cause = new Error('socket hang up');
    const failure = stageFailure({ type: 'RATE_LIMITED', stageId: 's', message: 'm', cause, nextRetryDelayMs: 7_000, nonRetryable: true, hint: 'wait' });
    expect(failure.cause).toBe(cause);
    expect(failure.nextRetryDelay).toBe(7_000);
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toBe('[RATE_LIMITED] stage s: m; wait');
  });

  it('never carries a registered secret in the message, details or cause chain, as Temporal serialises them', () => {
    const failure = secrets.run(() => failureWithSecrets());
    const converter = new DefaultFailureConverter();
    const serialised = JSON.stringify(converter.errorToFailure(failure, defaultPayloadConverter));
    expect(serialised).not.toContain(SECRET);
    expect(serialised).toContain('<redacted>');
    expect((failure.cause?.cause as Error | undefined)?.message).toBe('upstream said key <redacted> is bad');
  });

  it('redacts with the secrets of the activity it runs in, also after the activity awaited something', async () => {
    const later = await secrets.run(async () => {
      await new Promise((resolve) => setTimeout(resolve, 1));
      return failureWithSecrets();
    });
    expect(later.message).toBe(`[API_KEY_REJECTED] stage s: rejected <redacted>; ${FAILURES.API_KEY_REJECTED.hint}`);
  });

  it("redacts only with the secrets of the activity it runs in: another worker's, or none outside an activity, leave it alone", () => {
    expect(new SecretRegistry(['another-worker-key-0123']).run(() => failureWithSecrets()).message).toContain(SECRET);
    expect(failureWithSecrets().message).toContain(SECRET);
  });

  it('ignores values too short to be secrets', () => {
    expect(secrets.run(() => redactSecrets('a short word'))).toBe('a short word');
    expect(secrets.redact(`a short word and ${SECRET}`)).toBe('a short word and <redacted>');
  });
});

/** A failure whose message, details and causes all hold {@link SECRET}. */
function failureWithSecrets() {
  const inner = new Error(`upstream said key ${SECRET} is bad`);
  const cause = new Error(`401 invalid x-api-key ${SECRET}`, { cause: inner });
  return stageFailure({ type: 'API_KEY_REJECTED', stageId: 's', message: `rejected ${SECRET}`, details: { headers: { 'x-api-key': SECRET }, list: [SECRET] }, cause });
}

describe('failureTypeForStatus', () => {
  it('maps statuses and mid-stream error types', () => {
    const cases: [number | undefined, string | undefined, FailureType][] = [
      [401, undefined, 'API_KEY_REJECTED'],
      [403, undefined, 'API_KEY_REJECTED'],
      [400, undefined, 'INVALID_REQUEST'],
      [404, undefined, 'INVALID_REQUEST'],
      [413, undefined, 'INVALID_REQUEST'],
      [429, undefined, 'RATE_LIMITED'],
      [529, undefined, 'OVERLOADED'],
      [500, undefined, 'SERVER_ERROR'],
      [503, undefined, 'SERVER_ERROR'],
      [408, undefined, 'SERVER_ERROR'],
      [undefined, undefined, 'CONNECTION_ERROR'],
      [undefined, 'overloaded_error', 'OVERLOADED'],
      [undefined, 'rate_limit_error', 'RATE_LIMITED'],
      [undefined, 'api_error', 'SERVER_ERROR'],
    ];
    for (const [status, errorType, expected] of cases) expect(failureTypeForStatus(status, errorType), `${status} ${errorType}`).toBe(expected);
  });
});
