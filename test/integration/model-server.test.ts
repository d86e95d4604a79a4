import Anthropic from '@anthropic-ai/sdk';
import { execa } from 'execa';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { startModelServer, type ModelServer, type RecordedRequest } from '../../src/dev/model-server.js';

const CLAUDE_BIN = fileURLToPath(new URL('../../node_modules/.bin/claude', import.meta.url));
const FINAL_TEXT = 'Done.\n```json\n{"success": true, "summary": "created src/a.txt", "outputs": {}}\n```';

let server: ModelServer;
let scratch: string;
const logs: string[] = [];

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'model-server-test-'));
  server = await startModelServer({ scenario: { rules: [] }, log: (line) => logs.push(line) });
});

afterAll(async () => {
  await server?.close();
  await rm(scratch, { recursive: true, force: true });
});

beforeEach(() => {
  logs.length = 0;
});

function sdk(apiKey = 'sk-test'): Anthropic {
  return new Anthropic({ apiKey, baseURL: server.url, maxRetries: 0 });
}

async function caught(promise: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof Anthropic.APIError) return error;
    throw error;
  }
  throw new Error('expected the request to fail');
}

const ask = { model: 'claude-sonnet-5-5', max_tokens: 1024 } as const;

describe('the scripted model server, driven by the Anthropic SDK', { timeout: 60_000 }, () => {
  test('answers a non-streaming request with a full Message', async () => {
    server.setScenario({ rules: [{ match: 'hello', turns: [{ text: 'Hi there.', usage: { input_tokens: 12, output_tokens: 3 } }] }] });
    const message = await sdk().messages.create({ ...ask, messages: [{ role: 'user', content: 'hello model' }] });
    expect(message).toMatchObject({
      type: 'message', role: 'assistant', model: 'claude-sonnet-5-5', stop_reason: 'end_turn',
      content: [{ type: 'text', text: 'Hi there.' }], usage: { input_tokens: 12, output_tokens: 3 },
    });
    expect(message.id).toMatch(/^msg_/);
    const [recorded] = server.requests();
    expect(recorded).toMatchObject({ path: '/v1/messages', status: 200, outcome: 'reply', rule: 'rules[0] "hello"', turn: 0 });
    // SDK 1.14 sends the API key as `Authorization: Bearer`, not `x-api-key`.
    expect(recorded.headers.authorization).toBe('<redacted>');
  });

  test('streams text in the requested number of deltas', async () => {
    server.setScenario({ rules: [{ match: 'hello', turns: [{ text: 'one two three four', chunks: 4 }] }] });
    const stream = sdk().messages.stream({ ...ask, messages: [{ role: 'user', content: 'hello' }] });
    const deltas: string[] = [];
    stream.on('text', (delta) => deltas.push(delta));
    const message = await stream.finalMessage();
    expect(deltas).toHaveLength(4);
    expect(message.content).toEqual([expect.objectContaining({ type: 'text', text: 'one two three four' })]);
    expect(message.usage.output_tokens).toBeGreaterThan(0);
  });

  test('replies with tool calls, streamed and not, each with a unique id', async () => {
    const tools = [
      { name: 'Bash', input: { command: 'ls -la' } },
      { name: 'Read', input: { file_path: 'README.md', limit: 10 } },
    ];
    server.setScenario({ rules: [{ match: 'tools', repeatLastTurn: true, turns: [{ text: 'Looking.', tools }] }] });
    const request = { ...ask, messages: [{ role: 'user' as const, content: 'use tools' }] };
    const streamed = await sdk().messages.stream(request).finalMessage();
    const plain = await sdk().messages.create(request);
    for (const message of [streamed, plain]) {
      expect(message.stop_reason).toBe('tool_use');
      expect(message.content).toMatchObject([
        { type: 'text', text: 'Looking.' },
        { type: 'tool_use', name: 'Bash', input: { command: 'ls -la' } },
        { type: 'tool_use', name: 'Read', input: { file_path: 'README.md', limit: 10 } },
      ]);
    }
    const ids = [...streamed.content, ...plain.content].flatMap((b) => (b.type === 'tool_use' ? [b.id] : []));
    expect(new Set(ids).size).toBe(4);
    expect(ids.every((id) => id.startsWith('toolu_'))).toBe(true);
  });

  test('fails the first requests as scripted, with the error classes and headers of the real API', async () => {
    server.setScenario({
      rules: [{
        match: 'flaky',
        turns: [{
          text: 'finally',
          failFirst: [
            { status: 529, type: 'overloaded_error', message: 'Overloaded' },
            { status: 429, type: 'rate_limit_error', retryAfter: 2 },
          ],
        }],
      }],
    });
    const request = { ...ask, messages: [{ role: 'user' as const, content: 'flaky' }] };
    const overloaded = await caught(sdk().messages.create(request));
    expect(overloaded).toBeInstanceOf(Anthropic.InternalServerError);
    expect(overloaded.status).toBe(529);
    expect(overloaded.type).toBe('overloaded_error');
    expect(overloaded.requestID).toMatch(/^req_/);
    const limited = await caught(sdk().messages.stream(request).finalMessage());
    expect(limited).toBeInstanceOf(Anthropic.RateLimitError);
    expect(limited.headers?.get('retry-after')).toBe('2');
    const message = await sdk().messages.create(request);
    expect(message.content).toMatchObject([{ type: 'text', text: 'finally' }]);
    expect(server.requests().map((r) => r.status)).toEqual([529, 429, 200]);
    server.reset();
    expect((await caught(sdk().messages.create(request))).status).toBe(529);
  });

  test('rejects any other key with 401 when the scenario requires one', async () => {
    server.setScenario({ requireApiKey: 'sk-right', rules: [{ match: 'hi', turns: [{ text: 'welcome' }] }] });
    const request = { ...ask, messages: [{ role: 'user' as const, content: 'hi' }] };
    const rejected = await caught(sdk('sk-wrong').messages.create(request));
    expect(rejected).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(rejected.type).toBe('authentication_error');
    const bearer = new Anthropic({ apiKey: null, authToken: 'sk-right', baseURL: server.url, maxRetries: 0 });
    expect((await bearer.messages.create(request)).content).toMatchObject([{ text: 'welcome' }]);
    expect(server.requests().map((r) => r.outcome)).toEqual(['rejected', 'reply']);
  });

  test('fails loudly, without inviting retries, when the script has no answer', async () => {
    server.setScenario({ rules: [{ match: 'short', turns: [{ text: 'only one' }] }] });
    const exhausted = await caught(
      sdk().messages.create({
        ...ask,
        messages: [{ role: 'user', content: 'short' }, { role: 'assistant', content: 'only one' }, { role: 'user', content: 'more' }],
      }),
    );
    expect(exhausted.status).toBe(500);
    expect(exhausted.apiMessage).toContain('no more scripted turns for rule rules[0] "short" (asked for turn 1');
    expect(exhausted.headers?.get('x-should-retry')).toBe('false');
    const unmatched = await caught(sdk().messages.create({ ...ask, messages: [{ role: 'user', content: 'nothing matches' }] }));
    expect(unmatched.apiMessage).toContain('no scenario rule matches this request (first user message: "nothing matches")');
    expect(logs).toHaveLength(2);
  });

  test('counts tokens and answers unknown routes with a logged 404', async () => {
    const counted = await sdk().messages.countTokens({ model: ask.model, messages: [{ role: 'user', content: 'x'.repeat(400) }] });
    expect(counted.input_tokens).toBeGreaterThan(100);
    const missing = await caught(sdk().models.list());
    expect(missing).toBeInstanceOf(Anthropic.NotFoundError);
    expect(logs.join('\n')).toContain('unexpected request GET /v1/models');
  });

  test('streams a large repeated text in bounded chunks', async () => {
    const line = `${'x'.repeat(1023)}\n`;
    server.setScenario({ rules: [{ match: 'big', turns: [{ text: line, repeat: 8 * 1024 }] }] });
    let received = 0;
    let deltas = 0;
    const stream = sdk().messages.stream({ ...ask, messages: [{ role: 'user', content: 'big' }] });
    stream.on('text', (delta) => {
      received += delta.length;
      deltas += 1;
    });
    await stream.done();
    expect(received).toBe(8 * 1024 * 1024);
    expect(deltas).toBe(128);
  });

  test('survives a client that hangs up mid-stream', async () => {
    server.setScenario({ rules: [{ match: 'hang', turns: [{ text: 'y'.repeat(1024), repeat: 100_000, chunkDelayMs: 5 }] }] });
    const stream = sdk().messages.stream({ ...ask, messages: [{ role: 'user', content: 'hang' }] });
    await new Promise<void>((resolve) => stream.once('text', () => resolve()));
    stream.abort();
    await expect(stream.done()).rejects.toBeInstanceOf(Anthropic.APIUserAbortError);
    server.setScenario({ rules: [{ match: 'after', turns: [{ text: 'still here' }] }] });
    const message = await sdk().messages.create({ ...ask, messages: [{ role: 'user', content: 'after' }] });
    expect(message.content).toMatchObject([{ text: 'still here' }]);
  });

  test('stalls after message_start, and close() cuts the stalled stream instead of waiting', async () => {
    const file = join(scratch, 'stall.yaml');
    await writeFile(file, 'rules:\n  - match: stall\n    turns:\n      - text: too late\n        stallMs: 600000\n');
    const own = await startModelServer({ scenario: file, log: () => {} });
    const client = new Anthropic({ apiKey: 'sk-test', baseURL: own.url, maxRetries: 0 });
    const stream = client.messages.stream({ ...ask, messages: [{ role: 'user', content: 'stall' }] });
    const events: string[] = [];
    await new Promise<void>((resolve) =>
      stream.on('streamEvent', (event) => {
        events.push(event.type);
        resolve();
      }),
    );
    await own.close();
    const outcome = await stream.finalMessage().then(
      () => 'completed',
      () => 'failed',
    );
    expect(outcome).toBe('failed');
    expect(events).toEqual(['message_start']);
  });

  test('can be driven over HTTP: swap the scenario, read the requests, reset', async () => {
    const put = await fetch(`${server.url}/_scenario`, {
      method: 'PUT',
      body: 'rules:\n  - match: yaml\n    turns:\n      - text: from yaml\n',
    });
    expect(put.status).toBe(200);
    await sdk().messages.create({ ...ask, messages: [{ role: 'user', content: 'yaml please' }] });
    const recorded = (await (await fetch(`${server.url}/_scenario/requests`)).json()) as RecordedRequest[];
    expect(recorded).toMatchObject([{ seq: 0, path: '/v1/messages', outcome: 'reply', rule: 'rules[0] "yaml"' }]);
    const bad = await fetch(`${server.url}/_scenario`, { method: 'PUT', body: 'rules:\n  - match: yaml\n    turns: []\n' });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('rules[0].turns (line 3)');
    expect((await fetch(`${server.url}/_scenario/reset`, { method: 'POST' })).status).toBe(200);
    expect(server.requests()).toEqual([]);
  });
});

interface ClaudeRun {
  exitCode: number | undefined;
  events: Array<Record<string, unknown>>;
  result: Record<string, unknown> | undefined;
  stderr: string;
}

/** Runs the real `claude` CLI in `cwd` against the server, the prompt on stdin. */
async function runClaude(
  prompt: string,
  cwd: string,
  configHome: string,
  extraArgs: string[] = [],
  extraEnv: Record<string, string> = {},
): Promise<ClaudeRun> {
  const run = await execa(
    CLAUDE_BIN,
    ['-p', '--output-format', 'stream-json', '--verbose', '--bare', '--permission-mode', 'dontAsk',
      '--allowedTools', 'Bash', 'Edit', 'Read', '--model', 'sonnet', ...extraArgs],
    {
      cwd,
      input: prompt,
      reject: false,
      extendEnv: false,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: configHome,
        ANTHROPIC_BASE_URL: server.url,
        ANTHROPIC_API_KEY: 'sk-test',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        CLAUDE_CODE_MAX_RETRIES: '0',
        CLAUDE_CONFIG_DIR: join(configHome, 'claude'),
        ...extraEnv,
      },
    },
  );
  const events = run.stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
  const last = events.at(-1);
  return { exitCode: run.exitCode, events, result: last?.type === 'result' ? last : undefined, stderr: run.stderr };
}

async function freshDirs(): Promise<{ cwd: string; home: string }> {
  const base = await mkdtemp(join(scratch, 'cli-'));
  const cwd = join(base, 'work');
  await mkdir(cwd);
  return { cwd, home: base };
}

type Block = { type: string; [key: string]: unknown };
function blocksOf(request: RecordedRequest): Array<{ role: string; content: Block[] | string }> {
  return (request.body as { messages: Array<{ role: string; content: Block[] | string }> }).messages;
}

describe('the scripted model server, driven by the real claude CLI', { timeout: 60_000 }, () => {
  test('runs a Bash tool call, then finishes with the output contract', async () => {
    server.setScenario({
      rules: [{
        match: 'Stage: implement',
        turns: [
          {
            text: "I'll create the file.",
            tool: { name: 'Bash', input: { command: "mkdir -p src && printf 'hi' > src/a.txt && echo wrote" } },
          },
          { text: FINAL_TEXT, usage: { input_tokens: 1200, output_tokens: 300 }, chunks: 3 },
        ],
      }],
    });
    const { cwd, home } = await freshDirs();
    const run = await runClaude('Stage: implement\nCreate src/a.txt.', cwd, home);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(await readFile(join(cwd, 'src/a.txt'), 'utf8')).toBe('hi');
    expect(run.result).toMatchObject({ type: 'result', subtype: 'success', is_error: false, result: FINAL_TEXT });
    expect(run.result?.num_turns).toBeGreaterThanOrEqual(2);
    expect(run.result?.total_cost_usd).toBeGreaterThan(0);

    const requests = server.requests();
    expect(requests.map((r) => [r.path, r.query, r.turn, r.outcome])).toEqual([
      ['/v1/messages', 'beta=true', 0, 'reply'],
      ['/v1/messages', 'beta=true', 1, 'reply'],
    ]);
    const body = requests[0].body as { model: string; stream: boolean; tools: Array<{ name: string }> };
    expect(body).toMatchObject({ model: 'claude-sonnet-5-5', stream: true });
    expect(body.tools.map((t) => t.name).sort()).toEqual(['Bash', 'Edit', 'Read']);
    expect(requests[0].headers['x-api-key']).toBe('<redacted>');
    const toolUse = blocksOf(requests[1]).flatMap((m) => (Array.isArray(m.content) ? m.content : [])).find((b) => b.type === 'tool_use');
    const toolResult = blocksOf(requests[1]).at(-1);
    expect(toolResult).toMatchObject({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: toolUse?.id, content: 'wrote', is_error: false }],
    });
  });

  test('creates a file with Edit (empty old_string) and reads it back with Read', async () => {
    server.setScenario({
      rules: [{
        match: 'Stage: edit',
        turns: [
          { tool: { name: 'Edit', input: { file_path: 'docs/notes.md', old_string: '', new_string: '# Notes\nfirst line\n' } } },
          { tool: { name: 'Read', input: { file_path: 'docs/notes.md' } } },
          { text: FINAL_TEXT },
        ],
      }],
    });
    const { cwd, home } = await freshDirs();
    const run = await runClaude('Stage: edit', cwd, home);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.result).toMatchObject({ is_error: false, num_turns: 3, permission_denials: [] });
    expect(await readFile(join(cwd, 'docs/notes.md'), 'utf8')).toBe('# Notes\nfirst line\n');
    const requests = server.requests();
    expect(requests).toHaveLength(3);
    const readResult = blocksOf(requests[2]).at(-1);
    expect(JSON.stringify(readResult)).toContain('first line');
  });

  test('continues a resumed session at the next scripted turn', async () => {
    server.setScenario({
      rules: [{ match: 'Stage: plan', turns: [{ text: 'First answer.' }, { text: 'Second answer, after resuming.' }] }],
    });
    const { cwd, home } = await freshDirs();
    const sessionId = randomUUID();
    const first = await runClaude('Stage: plan', cwd, home, ['--session-id', sessionId]);
    expect(first.result).toMatchObject({ is_error: false, result: 'First answer.', session_id: sessionId });
    const second = await runClaude('Please continue.', cwd, home, ['--resume', sessionId]);
    expect(second.exitCode, second.stderr).toBe(0);
    expect(second.result).toMatchObject({ is_error: false, result: 'Second answer, after resuming.', session_id: sessionId });

    const [, resumed] = server.requests();
    expect(resumed).toMatchObject({ rule: 'rules[0] "Stage: plan"', turn: 1, outcome: 'reply' });
    const messages = blocksOf(resumed).filter((m) => m.role !== 'system');
    expect(JSON.stringify(messages[0].content)).toContain('Stage: plan');
    expect(messages[1]).toMatchObject({ role: 'assistant', content: [{ type: 'text', text: 'First answer.' }] });
    expect(JSON.stringify(messages.at(-1)?.content)).toContain('Please continue.');
    expect(resumed.headers['x-claude-code-session-id']).toBe(sessionId);
  });

  test('reports a scripted 529 as an API error result', async () => {
    server.setScenario({
      rules: [{ match: 'Stage: busy', turns: [{ text: 'never', failFirst: [{ status: 529, message: 'Overloaded' }] }] }],
    });
    const { cwd, home } = await freshDirs();
    const run = await runClaude('Stage: busy', cwd, home);
    expect(run.exitCode).toBe(1);
    expect(run.result).toMatchObject({ is_error: true, api_error_status: 529, terminal_reason: 'api_error' });
    expect(server.requests()).toHaveLength(1);
  });

  test('stops the CLI at once, even with its default retries, when the script has no answer', async () => {
    server.setScenario({ rules: [{ match: 'Stage: other', turns: [{ text: 'x' }] }] });
    const { cwd, home } = await freshDirs();
    const run = await runClaude('Stage: unknown', cwd, home, [], { CLAUDE_CODE_MAX_RETRIES: '10' });
    expect(run.result).toMatchObject({ is_error: true, api_error_status: 500 });
    expect(String(run.result?.result)).toContain('no scenario rule matches this request');
    expect(server.requests()).toHaveLength(1);
  });
});
