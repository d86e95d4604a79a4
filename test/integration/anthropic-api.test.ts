import { DefaultFailureConverter, defaultPayloadConverter } from '@temporalio/common';
import { createServer } from 'node:net';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startModelServer, type ModelServer } from '../../src/dev/model-server.js';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { CONTINUE_MESSAGE } from '../../src/activities/backends/anthropic-api/answer.js';
import { toFolderName } from '../../src/activities/workspace/run-folder.js';
import { activitiesFor, failureOf, stageInput, startAttempt } from '../helpers/stage-attempt.js';

const KEY = 'sk-ant-api03-RECOGNISABLE-test-key-0123456789';
const REPORT = (summary: string): string => `Here it is.\n\`\`\`json\n{"success": true, "summary": "${summary}", "outputs": {"lines": 3}}\n\`\`\``;
const PIPELINE = [
  'name: notes-pipeline',
  'stages:',
  '  - id: notes',
  '    backend: anthropic-api',
  '    model: haiku',
  '    maxTokens: 500',
  '    prompt: |',
  '      Write release notes for {{inputs.feature}}.',
  '      Previous failure: [{{previous.failed}}]',
].join('\n');

let server: ModelServer;
let root: string;
let run = 0;

beforeAll(async () => {
  server = await startModelServer({ scenario: { rules: [] }, log: () => {} });
  root = await mkdtemp(path.join(tmpdir(), 'api-backend-'));
});
afterAll(async () => {
  await server?.close();
  await rm(root, { recursive: true, force: true });
});
beforeEach(() => {
  run++;
});

/** A fresh run of the notes stage against `scenario`. */
function setUp(scenario: ScenarioInput, options: { apiKey?: string | null; baseURL?: string; yaml?: string } = {}) {
  server.setScenario(scenario);
  const apiKey = options.apiKey === null ? undefined : (options.apiKey ?? KEY);
  const activities = activitiesFor({ workspacesRoot: root, baseURL: options.baseURL ?? server.url, apiKey });
  const input = stageInput(options.yaml ?? PIPELINE, 'notes', { baseDir: root, runId: `run-${run}`, inputs: { feature: 'dark mode' } });
  return { activities, input, workspace: path.join(root, toFolderName(`run-${run}`)) };
}

const rule = (turns: ScenarioInput['rules'] extends (infer R)[] | undefined ? R extends { turns: infer T } ? T : never : never): ScenarioInput => ({
  rules: [{ match: 'Stage: notes ·', turns }],
});

async function readTranscript(workspace: string, relative: string): Promise<Record<string, unknown>[]> {
  return (await readFile(path.join(workspace, relative), 'utf8')).trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('the Anthropic API backend', () => {
  it('streams the answer into outputs/<stage>.md, with cost, heartbeats and a transcript', async () => {
    const { activities, input, workspace } = setUp(rule([{ text: REPORT('Wrote notes.'), chunks: 4, usage: { input_tokens: 1000, output_tokens: 200 } }]));
    const attempt = startAttempt(activities, input);
    const result = await attempt.result;

    expect(result).toMatchObject({ status: 'completed', summary: 'Wrote notes.', outputs: { lines: 3 }, usage: { inputTokens: 1000, outputTokens: 200 }, numTurns: 1, warnings: [] });
    expect(result.costUsd).toBeCloseTo((1000 * 0.5 + 200 * 2.5) / 1_000_000);
    expect(result.sessionId).toMatch(/^api-/);
    // The deliverable is the answer; the report block stays in the transcript and the result.
    expect(await readFile(path.join(workspace, 'outputs/notes.md'), 'utf8')).toBe('Here it is.\n');
    expect(result.artifacts).toEqual([expect.objectContaining({ path: 'outputs/notes.md', bytes: Buffer.byteLength('Here it is.\n') })]);

    const [request] = server.requests();
    expect(request.body).toMatchObject({ model: 'claude-haiku-5-5', max_tokens: 500, stream: true });
    expect(JSON.stringify(request.body)).toContain('Write release notes for dark mode.\\nPrevious failure: []');

    expect(attempt.heartbeats.length).toBeGreaterThanOrEqual(4);
    expect(attempt.heartbeats.at(-1)).toMatchObject({ sessionId: result.sessionId, usage: { inputTokens: 1000, outputTokens: 200 } });
    expect(attempt.heartbeats.at(-1)?.costUsd).toBeCloseTo(result.costUsd ?? 0);

    const events = await readTranscript(root, result.transcript!);
    expect(events[0]).toMatchObject({ type: 'system', subtype: 'init', backend: 'anthropic-api', model: 'claude-haiku-5-5' });
    expect(events.filter((e) => e.type === 'stream_event')).toHaveLength(4);
    expect(events.at(-1)).toMatchObject({ type: 'result', subtype: 'success', result: REPORT('Wrote notes.'), total_cost_usd: result.costUsd });
  });

  describe('an answer cut off at max_tokens', () => {
    it('is continued in the same conversation and appended to the deliverable', async () => {
      const { activities, input, workspace } = setUp(
        rule([
          { text: '# Notes\n\nPart one, ', stopReason: 'max_tokens', usage: { input_tokens: 1000, output_tokens: 500 } },
          { text: `part two.\n${REPORT('Continued.')}`, usage: { input_tokens: 1600, output_tokens: 100 } },
        ]),
      );
      const result = await startAttempt(activities, input).result;
      expect(result).toMatchObject({ status: 'completed', summary: 'Continued.', numTurns: 2, usage: { inputTokens: 2600, outputTokens: 600 } });
      expect(result.warnings).toEqual([expect.stringMatching(/^RESPONSE_CONTINUED: the answer reached max_tokens \(500\) and was completed after 1 continuation; raise maxTokens for stage notes/)]);
      expect(await readFile(path.join(workspace, 'outputs/notes.md'), 'utf8')).toBe('# Notes\n\nPart one, part two.\nHere it is.\n');

      const [, second] = server.requests();
      const body = second.body as { messages: { role: string; content: string }[] };
      expect(body.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
      expect(body.messages[1].content).toBe('# Notes\n\nPart one, ');
      // The request to continue ends the conversation prefix, so it carries the cache breakpoint.
      expect(body.messages[2].content).toEqual([{ type: 'text', text: CONTINUE_MESSAGE, cache_control: { type: 'ephemeral' } }]);
    });

    it('is continued at most maxContinuations times (2 by default), then kept as it is with RESPONSE_TRUNCATED', async () => {
      const { activities, input, workspace } = setUp({ rules: [{ match: 'Stage: notes ·', turns: [{ text: 'more ', stopReason: 'max_tokens' }], repeatLastTurn: true }] });
      const failure = await failureOf(startAttempt(activities, input).result);
      expect(failure).toMatchObject({ type: 'OUTPUT_CONTRACT_VIOLATION', nonRetryable: false });
      expect(server.requests()).toHaveLength(3);
      expect(failure.details?.[0]).toMatchObject({ warnings: [expect.stringMatching(/^RESPONSE_TRUNCATED: the answer stopped at max_tokens \(500\) after 2 continuations and is kept as it is; raise maxTokens \(or maxContinuations\) for stage notes/)] });
      expect(await readFile(path.join(workspace, 'outputs/notes.md'), 'utf8')).toBe('more more more ');
    });

    it('keeps its deliverable and its warning when the report retry completes the stage', async () => {
      const yaml = PIPELINE.replace('maxTokens: 500', 'maxTokens: 500\n    maxContinuations: 1');
      const { activities, input, workspace } = setUp(
        rule([
          { text: '# Notes\n\nPart one ', stopReason: 'max_tokens' },
          { text: 'part two\n```json\n{"success": true, "summ', stopReason: 'max_tokens' },
          { text: '```json\n{"success": true, "summary": "Reported after the cut.", "outputs": {}}\n```' },
        ]),
        { yaml },
      );
      const violation = await failureOf(startAttempt(activities, input).result);
      expect(violation).toMatchObject({ type: 'OUTPUT_CONTRACT_VIOLATION', nonRetryable: false });
      expect(violation.message).toContain('never closed: the answer was cut off');
      const deliverable = '# Notes\n\nPart one part two\n';
      expect(await readFile(path.join(workspace, 'outputs/notes.md'), 'utf8')).toBe(deliverable);

      const result = await startAttempt(activities, input, { attempt: 2 }).result;
      expect(result).toMatchObject({ status: 'completed', summary: 'Reported after the cut.', attempt: 2 });
      // The reply that only reports leaves the answer alone, and attempt 1's truncation is still reported.
      expect(await readFile(path.join(workspace, 'outputs/notes.md'), 'utf8')).toBe(deliverable);
      expect(result.artifacts).toEqual([expect.objectContaining({ path: 'outputs/notes.md', bytes: Buffer.byteLength(deliverable) })]);
      expect(result.warnings).toEqual([expect.stringMatching(/^RESPONSE_TRUNCATED: the answer stopped at max_tokens \(500\) after 1 continuation/)]);
      const retried = server.requests()[2].body as { messages: { role: string; content: string }[] };
      expect(retried.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
      expect(JSON.stringify(retried.messages[4].content)).toContain('reply now with only the fenced JSON block');
    });

    it('a retry after a killed attempt still reports the warnings its last heartbeat carried', async () => {
      const { activities, input } = setUp(rule([{ text: REPORT('After the crash.') }]));
      const earlier = { sessionId: 'msg_killed', turns: 0, costUsd: 0, lastEventAt: 1, warnings: ['RESPONSE_TRUNCATED: from attempt 1'] };
      const attempt = startAttempt(activities, input, { attempt: 2, heartbeatDetails: earlier });
      const result = await attempt.result;
      expect(result.warnings).toEqual(['RESPONSE_TRUNCATED: from attempt 1']);
      expect(attempt.heartbeats.at(-1)?.warnings).toEqual(['RESPONSE_TRUNCATED: from attempt 1']);
    });
  });

  it('reports tokens but no cost for a model with no known price', async () => {
    const yaml = PIPELINE.replace('model: haiku', 'model: claude-mystery-1');
    const { activities, input } = setUp(rule([{ text: REPORT('ok') }]), { yaml });
    const result = await startAttempt(activities, input).result;
    expect(result.costUsd).toBeNull();
    expect(result.usage.inputTokens).toBeGreaterThan(0);
    expect(result.warnings).toEqual([expect.stringContaining('no price is known for model claude-mystery-1')]);
  });

  it('fails an empty answer as retryable RESPONSE_EMPTY', async () => {
    const { activities, input } = setUp(rule([{ text: '  \n ' }]));
    const failure = await failureOf(startAttempt(activities, input).result);
    expect(failure).toMatchObject({ type: 'RESPONSE_EMPTY', nonRetryable: false });
    expect(failure.message).toMatch(/^\[RESPONSE_EMPTY\] stage notes: the model \(claude-haiku-5-5\) answered with no text/);
  });

  it('fails without an API key, saying where to set it', async () => {
    const { activities, input } = setUp(rule([{ text: REPORT('never') }]), { apiKey: null });
    const failure = await failureOf(startAttempt(activities, input).result);
    expect(failure).toMatchObject({ type: 'API_KEY_MISSING', nonRetryable: true });
    expect(failure.message).toMatch(/set ANTHROPIC_API_KEY .*in the environment of the worker/);
    expect(server.requests()).toHaveLength(0);
  });

  it('refuses to start when the pipeline budget is spent', async () => {
    const { activities, input } = setUp(rule([{ text: REPORT('never') }]));
    const failure = await failureOf(startAttempt(activities, { ...input, budgetRemainingUsd: 0 }).result);
    expect(failure).toMatchObject({ type: 'BUDGET_EXCEEDED', nonRetryable: true });
    expect(server.requests()).toHaveLength(0);
  });

  it('caps the stage at what is left of the pipeline budget, and warns when the call cost more', async () => {
    const yaml = PIPELINE.replace('maxTokens: 500', 'maxTokens: 500\n    maxBudgetUsd: 2');
    const { activities, input } = setUp(rule([{ text: REPORT('Pricey.'), usage: { input_tokens: 2_000_000, output_tokens: 40 } }]), { yaml });
    const result = await startAttempt(activities, { ...input, budgetRemainingUsd: 0.5 }).result;
    expect(JSON.stringify(server.requests()[0].body)).toContain('Spend at most $0.50 on this stage.');
    expect(result.warnings).toEqual([expect.stringMatching(/^BUDGET_EXCEEDED: the call cost \$1\.0001, more than the stage's cap of \$0\.5000/)]);
  });

  it('fails for good when an addDirs folder does not exist, before calling the model', async () => {
    const yaml = PIPELINE.replace('maxTokens: 500', 'maxTokens: 500\n    addDirs: [shared/libs]');
    const { activities, input } = setUp(rule([{ text: REPORT('never') }]), { yaml });
    const failure = await failureOf(startAttempt(activities, input).result);
    expect(failure).toMatchObject({ type: 'FILE_NOT_FOUND', nonRetryable: true });
    expect(failure.message).toContain(`addDirs entry shared/libs (${path.join(root, 'shared/libs')}) does not exist`);
    expect(server.requests()).toHaveLength(0);
  });

  describe('maps API errors to the catalogue', () => {
    const cases = [
      { status: 401, type: 'API_KEY_REJECTED', nonRetryable: true },
      { status: 403, type: 'API_KEY_REJECTED', nonRetryable: true },
      { status: 400, type: 'INVALID_REQUEST', nonRetryable: true },
      { status: 404, type: 'INVALID_REQUEST', nonRetryable: true },
      { status: 529, type: 'OVERLOADED', nonRetryable: false },
      { status: 500, type: 'SERVER_ERROR', nonRetryable: false },
    ] as const;
    for (const { status, type, nonRetryable } of cases) {
      it(`${status} as ${nonRetryable ? 'non-retryable' : 'retryable'} ${type}`, async () => {
        const { activities, input } = setUp(rule([{ error: { status, message: `scripted ${status}` } }]));
        const failure = await failureOf(startAttempt(activities, input).result);
        expect(failure).toMatchObject({ type, nonRetryable });
        expect(failure.message).toMatch(new RegExp(`^\\[${type}\\] stage notes: the Messages API answered ${status}.* for model claude-haiku-5-5: scripted ${status}; `));
        expect(failure.cause).toBeInstanceOf(Error);
      });
    }

    it('429 as RATE_LIMITED whose next retry waits for retry-after', async () => {
      const { activities, input } = setUp(rule([{ error: { status: 429, retryAfter: 7 } }]));
      const failure = await failureOf(startAttempt(activities, input).result);
      expect(failure).toMatchObject({ type: 'RATE_LIMITED', nonRetryable: false, nextRetryDelay: 7_000 });
      expect(failure.message).toContain('(retry after 7s)');
    });

    it('a refused connection as retryable CONNECTION_ERROR', async () => {
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const { port } = closed.address() as { port: number };
      await new Promise((resolve) => closed.close(resolve));
      const { activities, input } = setUp(rule([{ text: 'unused' }]), { baseURL: `http://127.0.0.1:${port}` });
      const failure = await failureOf(startAttempt(activities, input).result);
      expect(failure).toMatchObject({ type: 'CONNECTION_ERROR', nonRetryable: false });
      expect(failure.message).toContain('the Messages API could not be reached');
    });
  });

  it('tells the next attempt how the previous one failed ({{previous.failed}})', async () => {
    const { activities, input } = setUp(rule([{ text: REPORT('Second time lucky.'), failFirst: [{ status: 529 }] }]));
    await failureOf(startAttempt(activities, input).result);
    const result = await startAttempt(activities, input, { attempt: 2 }).result;
    expect(result.status).toBe('completed');
    const retried = JSON.stringify(server.requests()[1].body);
    expect(retried).toContain('Previous failure: [[OVERLOADED] stage notes: the Messages API answered 529');
    expect(retried).toContain('## Previous attempt\\nThe previous attempt did not succeed: [OVERLOADED]');
  });

  describe('counts every attempt of the stage in its cost, as Temporal retries are invisible to the workflow', () => {
    // What a killed attempt had spent by its last heartbeat, which Temporal hands to the retry.
    const killed = { sessionId: 'msg_killed', turns: 3, costUsd: 0.25, usage: { inputTokens: 400_000, outputTokens: 20_000 }, lastEventAt: 1 };

    it('a retry after a killed attempt adds its last heartbeat to the result and to its own heartbeats', async () => {
      const { activities, input } = setUp(rule([{ text: REPORT('After the crash.'), usage: { input_tokens: 1000, output_tokens: 200 } }]));
      const attempt = startAttempt(activities, input, { attempt: 2, heartbeatDetails: killed });
      const result = await attempt.result;
      expect(result.costUsd).toBeCloseTo(0.25 + 0.001, 6);
      expect(result.usage).toEqual({ inputTokens: 401_000, outputTokens: 20_200, cacheReadTokens: 0, cacheWriteTokens: 0 });
      // Should this attempt die too, the next one starts from the running total.
      expect(attempt.heartbeats.at(-1)?.costUsd).toBeCloseTo(0.251, 6);
      expect(attempt.heartbeats.every((beat) => (beat.costUsd ?? 0) >= 0.25)).toBe(true);
    });

    it('an attempt that failed with a cost passes it on through the stage folder', async () => {
      const { activities, input } = setUp(
        rule([
          { text: 'Done, but no report block.', usage: { input_tokens: 1000, output_tokens: 200 } },
          { text: REPORT('Reported.'), usage: { input_tokens: 2000, output_tokens: 200 } },
        ]),
      );
      const violation = await failureOf(startAttempt(activities, input).result);
      expect(violation).toMatchObject({ type: 'OUTPUT_CONTRACT_VIOLATION', nonRetryable: false });
      const result = await startAttempt(activities, input, { attempt: 2 }).result;
      expect(result.status).toBe('completed');
      expect(result.costUsd).toBeCloseTo(0.001 + 0.0015, 6);
      expect(result.usage).toEqual({ inputTokens: 3000, outputTokens: 400, cacheReadTokens: 0, cacheWriteTokens: 0 });
    });

    it('a failure reports the running total, and a retry whose earlier attempts spent the cap does not start', async () => {
      const yaml = PIPELINE.replace('maxTokens: 500', 'maxTokens: 500\n    maxBudgetUsd: 0.2');
      const { activities, input } = setUp(rule([{ text: REPORT('never') }]), { yaml });
      const failure = await failureOf(startAttempt(activities, input, { attempt: 2, heartbeatDetails: killed }).result);
      expect(failure).toMatchObject({ type: 'BUDGET_EXCEEDED', nonRetryable: true });
      expect(failure.message).toContain("the stage's earlier attempts spent $0.25 of its $0.20 cap before attempt 2 could start");
      expect(failure.details?.[0]).toMatchObject({ costUsd: 0.25, usage: killed.usage });
      expect(server.requests()).toHaveLength(0);
    });
  });

  it('stops streaming when the activity is cancelled, keeping the partial answer in the transcript', async () => {
    const { activities, input, workspace } = setUp(rule([{ text: 'chunk '.repeat(40), chunks: 40, chunkDelayMs: 50 }]));
    const attempt = startAttempt(activities, input);
    attempt.env.on('heartbeat', (beat: { usage?: { outputTokens: number } }) => {
      if ((beat.usage?.outputTokens ?? 0) > 0) attempt.env.cancel();
    });
    const failure = await failureOf(attempt.result);
    expect(failure.name).toBe('CancelledFailure');
    const stageFolder = path.join(root, '.agent-pipeline', 'runs', path.basename(workspace), 'stages', 'notes');
    const executions = (await readdir(stageFolder)).filter((d) => d.startsWith('round-'));
    const [transcript] = await Promise.all(executions.map((d) => readFile(path.join(stageFolder, d, 'attempt-1.jsonl'), 'utf8')));
    expect(transcript).toContain('"text_delta","text":"chunk ');
    expect(transcript).toContain('"subtype":"cancelled"');
    await expect(readFile(path.join(workspace, 'outputs/notes.md'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  describe('continuations', () => {
    it('re-send the conversation with the new message appended', async () => {
      const { activities, input, workspace } = setUp(rule([{ text: 'Which colour?\n\nBLOCKED: which colour should the theme use?' }, { text: REPORT('Used blue.') }]));
      const first = await startAttempt(activities, input).result;
      expect(first).toMatchObject({ status: 'needs_input', question: 'which colour should the theme use?' });

      const second = await startAttempt(activities, { ...input, continuation: { kind: 'answer', sessionId: first.sessionId, message: 'Use blue.' } }).result;
      expect(second).toMatchObject({ status: 'completed', summary: 'Used blue.', sessionId: first.sessionId });
      const body = server.requests()[1].body as { messages: { role: string; content: string }[] };
      expect(body.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
      expect(body.messages[1].content).toContain('BLOCKED: which colour');
      // The new message ends the conversation prefix the next continuation reads from the prompt cache.
      expect(body.messages[2].content).toEqual([{ type: 'text', text: 'Use blue.', cache_control: { type: 'ephemeral' } }]);
      expect(await readFile(path.join(workspace, 'outputs/notes.md'), 'utf8')).toBe('Here it is.\n');
    });

    it('start over with the full prompt, and a warning, when the conversation is gone', async () => {
      const { activities, input } = setUp(rule([{ text: REPORT('Fresh start.') }]));
      const result = await startAttempt(activities, { ...input, continuation: { kind: 'rework', sessionId: 'api-00000000-0000-0000-0000-000000000000', message: 'Shorter please.' } }).result;
      expect(result.warnings).toEqual([expect.stringContaining('could not be found; the stage started over with its full prompt')]);
      expect(JSON.stringify(server.requests()[0].body)).toContain('## Continue\\nShorter please.');
    });
  });

  describe('the output contract', () => {
    it('a missing report block is retried once in the same conversation, asking only for the block', async () => {
      const { activities, input } = setUp(rule([{ text: 'I wrote the notes.' }, { text: REPORT('Reported.') }]));
      const failure = await failureOf(startAttempt(activities, input).result);
      expect(failure).toMatchObject({ type: 'OUTPUT_CONTRACT_VIOLATION', nonRetryable: false });
      expect(failure.message).toContain('no fenced JSON block');

      const result = await startAttempt(activities, input, { attempt: 2 }).result;
      expect(result).toMatchObject({ status: 'completed', summary: 'Reported.' });
      const body = server.requests()[1].body as { messages: { role: string; content: string }[] };
      expect(body.messages).toHaveLength(3);
      expect(JSON.stringify(body.messages[2].content)).toContain('Do not redo the work: reply now with only the fenced JSON block');
    });

    it('is violated for good once contractRetries are used up', async () => {
      const { activities, input } = setUp({ rules: [{ match: 'Stage: notes ·', turns: [{ text: 'Nope.' }], repeatLastTurn: true }] });
      expect(await failureOf(startAttempt(activities, input).result)).toMatchObject({ nonRetryable: false });
      expect(await failureOf(startAttempt(activities, input, { attempt: 2 }).result)).toMatchObject({ type: 'OUTPUT_CONTRACT_VIOLATION', nonRetryable: true });
    });

    it('success: false fails the stage with the agent\'s error; a reviewer\'s verdict and feedback come through', async () => {
      const failed = setUp(rule([{ text: '```json\n{"success": false, "summary": "Could not.", "error": "the spec is empty"}\n```' }]));
      expect(await startAttempt(failed.activities, failed.input).result).toMatchObject({ status: 'failed', error: 'the spec is empty' });
      run++;
      const review = setUp(rule([{ text: '```json\n{"success": true, "summary": "Needs work.", "verdict": "rework", "feedback": ["add tests"]}\n```' }]));
      expect(await startAttempt(review.activities, review.input).result).toMatchObject({ status: 'completed', verdict: 'rework', feedback: ['add tests'] });
    });
  });

  it('never lets the API key reach failures, results, transcripts or the workspace', async () => {
    const rejected = setUp(rule([{ error: { status: 401, message: `invalid x-api-key ${KEY}` } }]));
    const failure = await failureOf(startAttempt(rejected.activities, rejected.input).result);
    expect(failure).toMatchObject({ type: 'API_KEY_REJECTED' });
    const serialised = JSON.stringify(new DefaultFailureConverter().errorToFailure(failure, defaultPayloadConverter));
    expect(serialised).toContain('invalid x-api-key <redacted>');
    expect(serialised).not.toContain(KEY);

    run++;
    const echoed = setUp(rule([{ text: `Your key is ${KEY}.\n${REPORT(`Saw ${KEY}`)}` }]));
    const result = await startAttempt(echoed.activities, echoed.input).result;
    expect(JSON.stringify(result)).not.toContain(KEY);
    expect(result.summary).toBe('Saw <redacted>');

    const files = await readdir(root, { recursive: true });
    for (const file of files) {
      const text = await readFile(path.join(root, file), 'utf8').catch(() => '');
      expect(text, file).not.toContain(KEY);
    }
  });
});
