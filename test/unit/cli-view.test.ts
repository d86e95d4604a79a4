import { describe, expect, test } from 'vitest';
import { DEFAULT_MODELS } from '../../src/activities/backends/models.js';
import { LiveView } from '../../src/cli/live-view.js';
import type { RunSnapshot } from '../../src/library/run-reader.js';
import { closingLines, listWaits, noticeLines, progressLines, summariseInput } from '../../src/cli/run-view.js';
import { TranscriptFormatter } from '../../src/cli/transcript.js';
import type { RunState } from '../../src/pipeline/run-state.js';

const T0 = 1_700_000_000_000;

function snapshot(state: Partial<RunState>, extra: Partial<RunSnapshot> = {}): RunSnapshot {
  return {
    state: { runId: 'run-1', pipeline: 'demo', status: 'running', inputs: {}, stages: [], costUsd: 0, startedAt: T0, ...state },
    source: 'query',
    executionStatus: 'RUNNING',
    taskQueue: 'agent-pipeline',
    workerPolling: true,
    live: new Map(),
    ...extra,
  };
}

const waiting = snapshot({
  status: 'waiting',
  costUsd: 0.0123,
  stages: [
    { id: 'spec', status: 'completed', backend: 'claude-cli', model: 'sonnet', attempt: 1, round: 1, startedAt: T0, finishedAt: T0 + 12_300, result: { costUsd: 0.0123, summary: 'Wrote the spec.' } as never },
    {
      id: 'ship',
      status: 'waiting',
      backend: 'claude-cli',
      model: 'sonnet',
      waitingFor: { kind: 'approval', message: 'Ship it?', commands: ['agent-pipeline approve run-1 --stage ship', 'agent-pipeline reject run-1 --stage ship --reason "..."'], since: T0 },
    },
  ],
});

describe('the progress view', () => {
  test('draws one row per stage with state, attempt, elapsed and cost, then what the run waits for and the commands', () => {
    expect(progressLines(waiting, T0 + 20_000)).toEqual([
      'Run run-1 · demo · waiting · 20.0s · $0.0123',
      '  ✔ spec  completed  attempt 1    12.3s  $0.0123  Wrote the spec.',
      '  ⏸ ship  waiting',
      '⏸ ship waits for approval: Ship it?',
      '    → agent-pipeline approve run-1 --stage ship',
      '    → agent-pipeline reject run-1 --stage ship --reason "..."',
    ]);
    expect(listWaits(waiting.state)).toEqual([expect.objectContaining({ stage: 'ship', kind: 'approval' })]);
  });

  test('marks finally stages and shows a run blocked on a question or timed out', () => {
    const ended = snapshot({
      status: 'timed_out',
      finishedAt: T0 + 5_000,
      stages: [
        { id: 'crawl', status: 'cancelled', backend: 'anthropic-api', model: 'haiku' },
        { id: 'record', finally: true, status: 'completed', backend: 'anthropic-api', model: 'haiku', result: { summary: 'Recorded.' } as never },
      ],
    });
    const lines = progressLines(ended, T0 + 9_000);
    expect(lines[0]).toBe('Run run-1 · demo · timed_out · 5.0s · $0.0000');
    expect(lines.find((l) => l.includes('record'))).toMatch(/record \(finally\)\s+completed.*Recorded\./);
  });

  test('says when no worker polls and when the state was rebuilt from history', () => {
    const lines = progressLines(snapshot({}, { workerPolling: false, source: 'history', taskQueue: 'q1' }), T0);
    expect(lines).toContain('! no worker is polling task queue "q1": the run waits until one starts (agent-pipeline worker)');
    expect(lines.at(-1)).toMatch(/^! state rebuilt from the event history/);
  });

  test('on a terminal, redraws the block in place and cuts lines to the terminal width', () => {
    const out: string[] = [];
    const view = new LiveView({ write: (t: string) => out.push(t), isTTY: true, columns: 30 });
    view.render(waiting, T0 + 1_000);
    view.render(waiting, T0 + 2_000);
    expect(out[0].startsWith('\x1b[')).toBe(false);
    expect(out[1].startsWith('\x1b[6F')).toBe(true); // back up over the six lines drawn before
    for (const line of out[1].split('\n').slice(0, -1)) expect(line.replace(/\x1b\[[0-9]*[A-Za-z]/g, '').length).toBeLessThanOrEqual(29);
    expect(out[1].endsWith('\x1b[J')).toBe(true);
  });

  test('piped, appends a line only when a stage changes, and the waits once', () => {
    const out: string[] = [];
    const view = new LiveView({ write: (t: string) => out.push(t) });
    view.render(waiting, T0 + 1_000);
    view.render(waiting, T0 + 2_000);
    expect(out.join('')).toBe(
      [
        '✔ spec completed · 12.3s · $0.0123 · Wrote the spec.',
        '⏸ ship waiting',
        '⏸ ship waits for approval: Ship it?',
        '    → agent-pipeline approve run-1 --stage ship',
        '    → agent-pipeline reject run-1 --stage ship --reason "..."',
        '',
      ].join('\n'),
    );
  });

  test("piped, a fork's taken-over stage shows its cost as carried and where it was taken over from, and the run its carried total", () => {
    const out: string[] = [];
    const spec = { ...waiting.state.stages[0], carriedCostUsd: 0.0123 };
    const fork = snapshot({ status: 'completed', costUsd: 0.02, carriedCostUsd: 0.0123, finishedAt: T0 + 30_000, forkedFrom: { runId: 'run-0', stage: 'ship' }, stages: [spec] });
    new LiveView({ write: (t: string) => out.push(t) }).render(fork, T0 + 30_000);
    expect(out.join('')).toBe(['✔ spec completed · 12.3s · $0.0123 carried · taken over from run-0: Wrote the spec.', 'Run run-1 completed · 30.0s · $0.0200 · $0.0123 carried', ''].join('\n'));
  });

  test("a taken-over stage that the fork ran again (a rework) shows its own cost beside the carried one, and its own summary", () => {
    const out: string[] = [];
    const totals = { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0.004, attempts: 1, durationMs: 1_000 };
    const spec = { ...waiting.state.stages[0], carriedCostUsd: 0.0123, round: 2, totals, result: { ...waiting.state.stages[0].result!, summary: 'Reworked the spec.' } };
    const fork = snapshot({ status: 'completed', costUsd: 0.004, carriedCostUsd: 0.0123, finishedAt: T0 + 30_000, forkedFrom: { runId: 'run-0', stage: 'ship' }, stages: [spec] });
    new LiveView({ write: (t: string) => out.push(t) }).render(fork, T0 + 30_000);
    expect(out[0]).toBe('✔ spec completed · round 2 · 12.3s · $0.0040 + $0.0123 carried · Reworked the spec.\n');
  });

  test('summarises a tool input by its command, path or pattern, on one short line', () => {
    expect(summariseInput({ command: 'npm test\n  --silent', description: 'Run the tests' })).toBe('npm test --silent');
    expect(summariseInput({ file_path: 'src/a.ts', old_string: 'x' })).toBe('src/a.ts');
    expect(summariseInput({ a: 1 })).toBe('{"a":1}');
    expect(summariseInput({ command: 'x'.repeat(200) }, 20)).toBe(`${'x'.repeat(19)}…`);
  });
});

describe('the transcript formatter', () => {
  const lines = [
    { type: 'system', subtype: 'init', session_id: 's-1', model: 'claude-sonnet-5-5', cwd: '/w/run-1' },
    { type: 'assistant', message: { id: 'm1', model: 'claude-sonnet-5-5', content: [{ type: 'text', text: 'Writing it.\nNow.' }], stop_reason: null, usage: { input_tokens: 1000, output_tokens: 1 } } },
    { type: 'assistant', message: { id: 'm1', model: 'claude-sonnet-5-5', content: [{ type: 'tool_use', name: 'Bash', input: { command: 'mkdir -p out && echo hi > out/a.txt' } }], stop_reason: null, usage: { input_tokens: 1000, output_tokens: 1 } } },
    { type: 'user', message: { content: [{ type: 'tool_result', content: `${'long output '.repeat(40)}`, is_error: false }] } },
    { type: 'user', message: { content: [{ type: 'tool_result', content: [{ type: 'text', text: 'permission denied' }], is_error: true }] } },
    { type: 'system', subtype: 'api_retry', attempt: 1, max_retries: 2, error_status: 529, error: 'overloaded' },
    { type: 'assistant', message: { id: 'm2', model: 'claude-haiku-5-5', content: [{ type: 'text', text: 'Done.' }], stop_reason: 'end_turn', usage: { input_tokens: 2000, output_tokens: 100 } } },
    { type: 'result', subtype: 'success', is_error: false, num_turns: 2, total_cost_usd: 0.0123, duration_ms: 4200 },
  ].map((event) => JSON.stringify(event));

  test('shows text, tool calls, shortened results and tokens and cost per turn', () => {
    const formatter = new TranscriptFormatter(DEFAULT_MODELS);
    const out = [...lines, 'not json at all', ''].flatMap((line) => formatter.format(line));
    expect(out).toEqual([
      '── session s-1 · claude-cli · model claude-sonnet-5-5 · cwd /w/run-1',
      '[turn 1 · 1000 input tokens · input $0.0020]',
      '  Writing it.',
      '  Now.',
      '  → Bash mkdir -p out && echo hi > out/a.txt',
      `  ← ok: ${'long output '.repeat(40).trim().slice(0, 159)}…`,
      '  ← error: permission denied',
      '! API error 529 overloaded; the CLI retries (1/2)',
      '[turn 2 · 2000 in / 100 out tokens · $0.0013]',
      '  Done.',
      '── done · 2 turns · $0.0123 · 4.2s',
      'not json at all',
    ]);
  });

  test('a failed result shows its errors', () => {
    const formatter = new TranscriptFormatter(DEFAULT_MODELS);
    const failed = JSON.stringify({ type: 'result', subtype: 'error_max_budget_usd', is_error: true, num_turns: 1, errors: ['Reached maximum budget ($1)'], result: null });
    expect(formatter.format(failed)).toEqual(['── failed (error_max_budget_usd) · 1 turn', '  Reached maximum budget ($1)']);
    const apiError = JSON.stringify({ type: 'result', subtype: 'error', is_error: true, error: { type: 'overloaded_error', message: 'busy' } });
    expect(formatter.format(apiError)).toEqual(['── failed (error) · 0 turns', '  overloaded_error: busy']);
  });
});

describe('the closing lines', () => {
  test('list each artifact with its path, then what a stage changed beyond the listed ones, by top folder', () => {
    const state = snapshot({
      status: 'completed',
      workspace: '/w/run-1',
      stages: [
        {
          id: 'setup',
          status: 'completed',
          backend: 'claude-cli',
          model: 'sonnet',
          result: {
            artifacts: [{ path: 'requirements.txt', bytes: 12, sha256: 'a'.repeat(64) }],
            artifactsOmitted: { count: 19_000, bytes: 80 * 1024 * 1024, byFolder: { '.venv/': 18_990, 'build/': 10 } },
            warnings: [],
          } as never,
        },
      ],
    }).state;
    expect(closingLines(state, undefined)).toEqual([
      'Workspace: /w/run-1',
      'Artifacts:',
      '  setup  /w/run-1/requirements.txt  12 bytes',
      '  setup  … and 19000 more files (80.0 MB): .venv/ 18990, build/ 10',
    ]);
  });
});

describe('a run refused before any stage started', () => {
  test('shows its error once, with its type once, whether or not the message starts with it', () => {
    const stages = [{ id: 'a', status: 'pending' }] as never;
    const tagged = snapshot({ status: 'failed', stages, error: { type: 'PIPELINE_INVALID', message: '[PIPELINE_INVALID] the run input is not valid' } }, { executionStatus: 'FAILED' });
    expect(noticeLines(tagged)).toEqual(['✘ [PIPELINE_INVALID] the run input is not valid']);
    const bare = snapshot({ status: 'failed', stages, error: { type: 'RUN_NOT_TRUSTED', message: 'no signature' } }, { executionStatus: 'FAILED' });
    expect(noticeLines(bare)).toEqual(['✘ [RUN_NOT_TRUSTED] no signature']);
  });
});
