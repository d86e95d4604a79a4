import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeCostUsd, DEFAULT_MODELS } from '../../src/activities/backends/models.js';
import { startModelServer, type ModelServer } from '../../src/dev/model-server.js';
import { activitiesFor, failureOf, stageInput, startAttempt } from '../helpers/stage-attempt.js';

/*
 * Prompt caching on the API backend, against the scripted model server with its prompt cache on: a request's
 * prefix up to each breakpoint is written, and a later request with the same prefix reads it.
 */

const KEY = 'sk-ant-api03-cache-test-key-0123456789';
const REPORT = (summary: string): string => `Done.\n\`\`\`json\n{"success": true, "summary": "${summary}", "outputs": {}}\n\`\`\``;
/** About 10k tokens at the server's four characters a token: well above the 1024-token minimum. */
const CONTEXT = `# Product handbook\n${'Umbrellas keep people dry when it rains. '.repeat(1000)}\n`;
const pipeline = (cache?: boolean): string =>
  [
    'name: cache-pipeline',
    'context: [handbook.md]',
    ...(cache === undefined ? [] : ['defaults:', `  cache: ${cache}`]),
    'stages:',
    '  - id: notes',
    '    backend: anthropic-api',
    '    model: sonnet',
    '    prompt: Write release notes.',
    '  - id: tweet',
    '    backend: anthropic-api',
    '    model: sonnet',
    '    prompt: Write a tweet.',
  ].join('\n');

let server: ModelServer;
let root: string;
let run = 0;

beforeAll(async () => {
  server = await startModelServer({ scenario: { rules: [] }, log: () => {} });
  root = await mkdtemp(path.join(tmpdir(), 'prompt-cache-'));
  await writeFile(path.join(root, 'handbook.md'), CONTEXT);
});
afterAll(async () => {
  await server?.close();
  await rm(root, { recursive: true, force: true });
});

function setUp(turns: { notes: object[]; tweet?: object[] }, cache?: boolean) {
  run++;
  server.setScenario({
    promptCache: true,
    rules: [
      { match: 'Stage: notes ·', turns: turns.notes },
      { match: 'Stage: tweet ·', turns: turns.tweet ?? [{ text: REPORT('Tweeted.') }] },
    ],
  });
  const activities = activitiesFor({ workspacesRoot: root, baseURL: server.url, apiKey: KEY });
  const input = (stageId: string) => stageInput(pipeline(cache), stageId, { baseDir: root, runId: `run-${run}` });
  return { activities, input };
}

/** Every `cache_control` mark in a request body. */
function breakpointsOf(body: unknown): number {
  return (JSON.stringify(body).match(/"cache_control":\{"type":"ephemeral"\}/g) ?? []).length;
}

describe('prompt caching on the API backend', () => {
  it('writes the context, persona and prompt on the first call, and a contract retry reads them back', async () => {
    const { activities, input } = setUp({ notes: [{ text: 'Done, but no report block.' }, { text: REPORT('Reported.') }] });
    const violation = await failureOf(startAttempt(activities, input('notes')).result);
    expect(violation).toMatchObject({ type: 'OUTPUT_CONTRACT_VIOLATION' });
    const first = (violation.details?.[0] as { usage: { cacheWriteTokens: number; cacheReadTokens: number } }).usage;
    expect(first.cacheWriteTokens).toBeGreaterThan(10_000);
    expect(first.cacheReadTokens).toBe(0);

    const result = await startAttempt(activities, input('notes'), { attempt: 2 }).result;
    expect(result.status).toBe('completed');
    const [firstRequest, retry] = server.requests().map((r) => r.body as { system: { text: string }[]; messages: unknown[] });
    // The context file is its own system block, ahead of the persona, and marked; so is the end of the conversation.
    expect(firstRequest.system[0].text).toContain('## Project context\n### handbook.md');
    expect(breakpointsOf(firstRequest)).toBeGreaterThanOrEqual(2);
    expect(breakpointsOf(retry)).toBeLessThanOrEqual(4);
    expect(retry.system).toEqual(firstRequest.system);
    expect(retry.messages).toHaveLength(3);
    // The retry read everything the first call wrote, and wrote only the new turn.
    expect(result.usage.cacheReadTokens).toBe(first.cacheWriteTokens);
    expect(result.usage.cacheWriteTokens! - first.cacheWriteTokens).toBeLessThan(first.cacheWriteTokens / 5);
    // Cost counts every kind of token at its own price.
    expect(result.costUsd).toBeCloseTo(computeCostUsd('claude-sonnet-5-5', result.usage, DEFAULT_MODELS)!, 9);
    expect(result.costUsd).toBeGreaterThan(computeCostUsd('claude-sonnet-5-5', { inputTokens: result.usage.inputTokens, outputTokens: result.usage.outputTokens }, DEFAULT_MODELS)!);
  });

  it('lets another stage of the run read the shared context block', async () => {
    const { activities, input } = setUp({ notes: [{ text: REPORT('Notes.') }] });
    const notes = await startAttempt(activities, input('notes')).result;
    const tweet = await startAttempt(activities, input('tweet')).result;
    const contextTokens = Math.ceil(CONTEXT.length / 4);
    expect(notes.usage.cacheReadTokens).toBe(0);
    expect(tweet.usage.cacheReadTokens).toBeGreaterThan(contextTokens);
    expect(tweet.usage.cacheReadTokens).toBeLessThan(notes.usage.cacheWriteTokens!);
  });

  it('sends no breakpoint with `cache: false`, and then nothing is cached', async () => {
    const { activities, input } = setUp({ notes: [{ text: 'No block.' }, { text: REPORT('Reported.') }] }, false);
    await failureOf(startAttempt(activities, input('notes')).result);
    const result = await startAttempt(activities, input('notes'), { attempt: 2 }).result;
    expect(server.requests().map((r) => breakpointsOf(r.body))).toEqual([0, 0]);
    expect(result.usage).toMatchObject({ cacheReadTokens: 0, cacheWriteTokens: 0 });
  });
});
