import { describe, expect, it } from 'vitest';
import { LeaseBook, MAX_GONE_SEALS } from '../../src/workflows/lease-book.js';
import { MAX_SEAL_AGE_MS } from '../../src/contracts/message-seal.js';
import { renderLimitKeys } from '../../src/pipeline/limits.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';
import { stageRows, waitLines } from '../../src/cli/run-view.js';
import type { RunState } from '../../src/pipeline/run-state.js';

const pipeline = (limits: string, stageLimits = ''): string =>
  ['name: p', 'inputs: { repo: { description: r } }', `limits: ${limits}`, 'stages:', `  - { id: a, prompt: x${stageLimits ? `, limits: ${stageLimits}` : ''} }`].join('\n');

describe('limits in a pipeline file', () => {
  it('accepts keys over inputs, the run id and the pipeline name, on the pipeline and on a stage', () => {
    const parsed = parsePipeline(pipeline('[{ key: "repo:{{inputs.repo}}", concurrency: 1 }]', '[{ key: "{{run.pipeline}}:{{run.id}}", concurrency: 2 }]'), 'p.yaml');
    expect(parsed.limits).toEqual([{ key: 'repo:{{inputs.repo}}', concurrency: 1 }]);
    expect(parsed.stages[0].limits).toEqual([{ key: '{{run.pipeline}}:{{run.id}}', concurrency: 2 }]);
  });

  it('reports a bad key with its field path and the fix', () => {
    expect(pipelineProblems(pipeline('[{ key: "repo:{{inputs.rep}}", concurrency: 1 }]'))).toEqual([
      'limits[0].key: {{inputs.rep}} is not an input of the pipeline; declare it under `inputs` (known: repo)',
    ]);
    expect(pipelineProblems(pipeline('[{ key: "k", concurrency: 1 }]', '[{ key: "x:{{stages.a.summary}}", concurrency: 1 }]'))).toEqual([
      'stages[0].limits[0].key: a key may use {{inputs.NAME}}, {{run.id}} and {{run.pipeline}}, not {{stages.a.summary}}: it is decided when the run or stage starts',
    ]);
    expect(pipelineProblems(pipeline('[{ key: "k", concurrency: 1 }, { key: "k", concurrency: 2 }]'))).toEqual(['limits[1].key: key "k" is listed twice; list each key once']);
    expect(pipelineProblems(pipeline('[{ key: "k", concurrency: 0 }]'))).toEqual(['limits[0].concurrency: 0 is too small; use a whole number from 1 to 1000']);
    expect(pipelineProblems(pipeline('[{ key: "k" }]'))).toEqual([expect.stringMatching(/^limits\[0\]\.concurrency: /)]);
  });

  it('renders keys sorted (the order they are taken in), one entry per key with its smallest limit', () => {
    const run = { id: 'run-1', pipeline: 'p', inputs: { repo: 'acme' } };
    const limits = [
      { key: 'repo:{{inputs.repo}}', concurrency: 2 },
      { key: 'api', concurrency: 3 },
      { key: 'repo:acme', concurrency: 1 },
    ];
    expect(renderLimitKeys(limits, run, 'stage a')).toEqual([
      { key: 'api', concurrency: 3 },
      { key: 'repo:acme', concurrency: 1 },
    ]);
    expect(() => renderLimitKeys([{ key: 'repo:{{inputs.repo}}', concurrency: 1 }], { ...run, inputs: { repo: 'x'.repeat(300) } }, 'stage a')).toThrow(/renders to .* \(305 characters\); a key must be 1 to 200 characters/);
  });
});

describe('the lease book of one key', () => {
  it('grants first come first served: a waiter behind a larger limit does not jump the head', () => {
    const book = new LeaseBook();
    expect(book.request({ holder: 'a', limit: 1, ttlMs: 1_000 }, 0)).toEqual({ granted: true, expiresAt: 1_000 });
    expect(book.request({ holder: 'b', limit: 1, ttlMs: 1_000 }, 0)).toMatchObject({ granted: false, ahead: 0 });
    expect(book.request({ holder: 'c', limit: 5, ttlMs: 1_000 }, 0)).toMatchObject({ granted: false, ahead: 1 });
    book.release('a', 10);
    expect(book.answer('b')).toMatchObject({ granted: true });
    // c's own limit (5) lets it in next to b.
    expect(book.answer('c')).toMatchObject({ granted: true });
  });

  it('expires a holder not renewed within its ttl, and a waiter that stopped asking', () => {
    const book = new LeaseBook();
    book.request({ holder: 'a', limit: 1, ttlMs: 1_000 }, 0);
    book.request({ holder: 'b', limit: 1, ttlMs: 1_000 }, 0, 500);
    expect(book.renew('a', 900)).toEqual({ held: true, expiresAt: 1_900 });
    // b asked last at 0 with a 500 ms wait: dropped at 1,500, before a expires.
    expect(book.expire(1_600)).toEqual(['b']);
    expect(book.expire(1_900)).toEqual(['a']);
    expect(book.isEmpty()).toBe(true);
    expect(book.renew('a', 2_000)).toEqual({ held: false });
  });

  it('holds a lease without a ttl until it is released (a run\'s life)', () => {
    const book = new LeaseBook();
    book.request({ holder: 'run', limit: 1 }, 0);
    expect(book.expire(10 ** 12)).toEqual([]);
    expect(book.nextDeadline()).toBeUndefined();
    expect(book.release('run', 1)).toBe(true);
  });

  it('remembers the seal of a holder that left until its messages are too old to be taken, and carries it on', () => {
    const book = new LeaseBook();
    book.request({ holder: 'a', limit: 1, ttlMs: 1_000 }, 0);
    book.takeSeal('a', 100);
    book.takeSeal('a', 50);
    expect(book.lastSeal('a')).toBe(100);
    // In the book, its seal is kept however old.
    expect(book.forgetSeals(10 ** 9)).toBeUndefined();
    book.release('a', 200);
    expect(book.forgetSeals(300)).toBe(100 + MAX_SEAL_AGE_MS + 1);
    // Handed to the next execution with the book; never shown.
    const next = new LeaseBook(book.snapshot());
    expect(next.lastSeal('a')).toBe(100);
    expect(next.view()).not.toHaveProperty('seals');
    expect(next.forgetSeals(100 + MAX_SEAL_AGE_MS)).toBe(100 + MAX_SEAL_AGE_MS + 1);
    expect(next.forgetSeals(100 + MAX_SEAL_AGE_MS + 1)).toBeUndefined();
    expect(next.lastSeal('a')).toBeUndefined();
    expect(next.snapshot()).not.toHaveProperty('seals');
  });

  it('forgets the oldest seals of holders that left beyond its bound', () => {
    const book = new LeaseBook();
    for (let i = 0; i <= MAX_GONE_SEALS; i++) book.takeSeal(`h${i}`, i);
    book.forgetSeals(0);
    expect(book.lastSeal('h0')).toBeUndefined();
    expect(book.lastSeal('h1')).toBe(1);
    expect(book.snapshot().seals).toHaveLength(MAX_GONE_SEALS);
  });
});

describe('status of runs waiting for a key', () => {
  const wait = { key: 'repo:acme', ahead: 1, holders: 2, limit: 2, since: 0 };
  const state = (extra: Partial<RunState>, stage: Partial<RunState['stages'][number]> = {}): RunState => ({
    runId: 'r',
    pipeline: 'p',
    status: 'running',
    inputs: {},
    stages: [{ id: 'build', status: 'running', backend: 'claude-cli', model: 'sonnet', ...stage }],
    costUsd: 0,
    startedAt: 0,
    ...extra,
  });

  it('says what a stage waits for and how many are ahead', () => {
    expect(stageRows(state({}, { leaseWait: wait }), new Map(), 1_000)[0].at(-1)).toBe('waits for key repo:acme (1 ahead, 2 of 2 held)');
  });

  it('says what the run waits for before its first stage', () => {
    expect(waitLines(state({ leaseWait: wait }, { status: 'pending' }))).toEqual(['⏳ the run waits for key repo:acme (1 ahead, 2 of 2 held); its stages start once it holds the key']);
    expect(waitLines(state({ status: 'completed', leaseWait: wait }))).toEqual([]);
  });
});
