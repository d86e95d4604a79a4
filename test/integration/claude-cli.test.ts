import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { computeCostUsd, DEFAULT_MODELS, resolveModelId } from '../../src/activities/backends/models.js';
import type { RecordedRequest } from '../../src/dev/model-server.js';
import { createCliWorld, failureOf, REPORT, stageProcesses, TEST_API_KEY, waitFor, type CliWorld } from './claude-cli-world.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';

/*
 * The Claude Code CLI backend with the real `claude` binary against the scripted model server:
 * flags, result mapping, heartbeats, prompt delivery, MCP checks, secrets.
 */

let world: CliWorld;
let extraDir: string;

beforeAll(async () => {
  world = await createCliWorld({ rules: [] });
  extraDir = path.join(world.root, 'extra');
  await mkdir(extraDir, { recursive: true });
  world.server.setScenario({
    rules: [
      {
        name: 'flags',
        match: 'Task: flags',
        turns: [
          {
            text: 'Writing both files.',
            tools: [
              { name: 'Bash', input: { command: 'mkdir -p out && echo hello > out/a.txt && echo wrote' } },
              { name: 'Write', input: { file_path: path.join(extraDir, 'b.txt'), content: 'outside the workspace\n' } },
            ],
            usage: { input_tokens: 1000, output_tokens: 200 },
          },
          { text: `All done.\n${REPORT}`, usage: { input_tokens: 1500, output_tokens: 100 } },
        ],
      },
      {
        name: 'denied',
        match: 'Task: denied',
        turns: [{ tool: { name: 'Bash', input: { command: 'touch should-not-exist' } } }, { text: `Could not run it.\n${REPORT}` }],
      },
      { name: 'big prompt', match: 'Task: big prompt', turns: [{ text: `Read it all.\n${REPORT}` }] },
      {
        name: 'cache usage',
        match: 'Task: cache usage',
        // Each kind of token in its own order of magnitude, so a wrong price for any one of them shows in the total.
        turns: [{ text: `Cached.\n${REPORT}`, usage: { input_tokens: 1000, output_tokens: 200, cache_creation_input_tokens: 30_000, cache_read_input_tokens: 2_000_000 } }],
      },
      {
        name: 'secret',
        match: 'Task: secret',
        turns: [
          { tool: { name: 'Bash', input: { command: 'env | grep ANTHROPIC_API_KEY' } } },
          { text: `The key is ${TEST_API_KEY}.\n${REPORT}` },
        ],
      },
      { name: 'mcp', match: 'Task: mcp', turns: [{ text: `Ran without its MCP server.\n${REPORT}` }] },
      {
        name: 'resume',
        match: 'Task: resume',
        repeatLastTurn: true,
        turns: [{ text: `First answer.\n${REPORT}` }, { text: `Second answer.\n${REPORT}` }, { text: `Third answer.\n${REPORT}` }],
      },
      // The agent must not finish before the second attempt stops it. Unsandboxed, the stop's SIGTERM can end the tool's
      // sleep first and the agent asks again at once: that answer is held back longer than the stop's grace.
      { name: 'guard 1', match: 'Task: guard, first', turns: [{ tool: { name: 'Bash', input: { command: 'echo busy && sleep 300' } } }, { text: 'never', delayMs: 60_000 }] },
      { name: 'guard 2', match: 'Task: guard, second', turns: [{ text: `Alone in the stage.\n${REPORT}` }] },
    ],
  });
});

afterAll(async () => {
  await world?.close();
});

function requestsOf(rule: string): RecordedRequest[] {
  return world.server.requests().filter((r) => r.rule === rule);
}

function systemText(request: RecordedRequest): string {
  const system = (request.body as { system?: { text: string }[] | string }).system;
  return Array.isArray(system) ? system.map((b) => b.text).join('\n') : String(system ?? '');
}

function userText(request: RecordedRequest, which: 'first' | 'last'): string {
  const messages = (request.body as { messages: { role: string; content: string | { type: string; text?: string }[] }[] }).messages;
  const users = messages.filter((m) => m.role === 'user');
  const message = which === 'first' ? users[0] : users[users.length - 1];
  return typeof message.content === 'string' ? message.content : message.content.map((b) => b.text ?? '').join('');
}

describe('the Claude Code CLI backend', () => {
  test('runs a stage with its model, tools, budget and extra folder, and maps the result', async () => {
    const attempt = await world.start({
      task: 'Task: flags',
      stage: { model: 'sonnet', fallbackModel: 'haiku', permissionMode: 'dontAsk', allowedTools: ['Bash', 'Write'], disallowedTools: ['WebFetch'] },
      request: { maxBudgetUsd: 3, addDirs: [extraDir] },
    });
    const outcome = await attempt.outcome;

    expect(outcome.text).toContain(REPORT);
    expect(outcome.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(outcome).toMatchObject({ usage: { inputTokens: 2500, outputTokens: 300 }, permissionDenials: [], warnings: [] });
    // The CLI counts turns its own way (here 3: two model messages, one of them with two tool calls).
    expect(outcome.numTurns).toBeGreaterThanOrEqual(2);
    expect(outcome.costUsd).toBeGreaterThan(0);
    expect(await readFile(path.join(attempt.dir, 'out', 'a.txt'), 'utf8')).toBe('hello\n');
    expect(await readFile(path.join(extraDir, 'b.txt'), 'utf8')).toBe('outside the workspace\n');

    const [first] = requestsOf('flags');
    expect((first.body as { model: string }).model).toBe('claude-sonnet-5-5');
    expect(systemText(first)).toContain('You are a test agent.');
    const tools = (first.body as { tools: { name: string }[] }).tools.map((t) => t.name);
    expect(tools).toContain('Bash');
    expect(tools).not.toContain('WebFetch');

    // Heartbeats carry the session, and cost summed from per-message usage while the stream runs.
    const last = attempt.heartbeats.at(-1);
    expect(last).toMatchObject({ sessionId: outcome.sessionId, turns: outcome.numTurns, costUsd: outcome.costUsd });
    const firstMessageCost = computeCostUsd('claude-sonnet-5-5', { inputTokens: 1000, outputTokens: 200 }, DEFAULT_MODELS) ?? 0;
    const afterFirstMessage = attempt.heartbeats.filter((h) => h.turns === 1 && h.usage?.outputTokens === 200);
    expect(afterFirstMessage.length).toBeGreaterThan(0);
    expect(afterFirstMessage[0].costUsd).toBeCloseTo(firstMessageCost, 6);

    // The transcript holds the stream, without the partial-message deltas.
    const transcript = (await readFile(attempt.request.transcriptPath, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { type: string });
    expect(transcript.map((e) => e.type)).toEqual(expect.arrayContaining(['system', 'assistant', 'user', 'result']));
    expect(transcript.some((e) => e.type === 'stream_event')).toBe(false);
  });

  test.each(['haiku', 'sonnet', 'opus'])('reports cache reads and writes, and its own cost on %s agrees with what the API backend computes for the same usage', async (tier) => {
    const outcome = await (await world.start({ task: 'Task: cache usage', stage: { model: tier } })).outcome;
    expect(outcome.usage).toEqual({ inputTokens: 1000, outputTokens: 200, cacheReadTokens: 2_000_000, cacheWriteTokens: 30_000 });
    // The CLI prices the tokens itself (its `total_cost_usd`); the API backend prices them with the catalogue. The two
    // must never drift apart: a stage costs the same on either backend.
    const model = resolveModelId(tier, DEFAULT_MODELS);
    expect(outcome.costUsd).toBeCloseTo(computeCostUsd(model, outcome.usage, DEFAULT_MODELS)!, 9);
    expect(outcome.costUsd).toBeGreaterThan(computeCostUsd(model, { inputTokens: 1000, outputTokens: 200 }, DEFAULT_MODELS)!);
  });

  test('reports tool calls the CLI denied as permission denials', async () => {
    const attempt = await world.start({ task: 'Task: denied', stage: { allowedTools: ['Read'] } });
    const outcome = await attempt.outcome;
    expect(outcome.permissionDenials).toEqual([{ tool: 'Bash', input: expect.objectContaining({ command: 'touch should-not-exist' }) }]);
    expect(existsSync(path.join(attempt.dir, 'should-not-exist'))).toBe(false);
  });

  test('sends a 1 MB prompt on stdin and a system prompt over 128 KiB through a file', async () => {
    const filler = 'All work and no play. '.repeat(48_000);
    const persona = `You are a careful agent. ${'Be precise. '.repeat(14_000)}`;
    const attempt = await world.start({ task: `Task: big prompt\n${filler}`, request: { prompt: { system: persona, user: `Task: big prompt\n${filler}` } } });
    const outcome = await attempt.outcome;
    expect(outcome.text).toContain(REPORT);
    const [request] = requestsOf('big prompt');
    expect(userText(request, 'first')).toContain(filler);
    expect(systemText(request)).toContain(persona);
  });

  test('never lets the API key into the transcript or the outcome, even when the agent prints it', async () => {
    const attempt = await world.start({ task: 'Task: secret', stage: { allowedTools: ['Bash'] } });
    const outcome = await attempt.outcome;
    expect(outcome.text).toContain('The key is <redacted>.');
    expect(JSON.stringify(outcome)).not.toContain(TEST_API_KEY);
    const transcript = await readFile(attempt.request.transcriptPath, 'utf8');
    expect(transcript).toContain('ANTHROPIC_API_KEY=<redacted>');
    expect(transcript).not.toContain(TEST_API_KEY);
  });

  test('merges pipeline and stage MCP servers, and warns about a server that failed to start', async () => {
    const attempt = await world.start({
      task: 'Task: mcp',
      request: { mcpServers: { tools: { command: 'false' }, shared: { command: 'definitely-not-installed-mcp' } } },
      // The stage's entry wins over the pipeline's broken one.
      stage: { mcpServers: { shared: { command: 'true', args: ['--stdio'] } } },
    });
    const outcome = await attempt.outcome;
    const config = JSON.parse(await readFile(path.join(attempt.stageDir, 'mcp-config.json'), 'utf8')) as unknown;
    // Each stdio server starts in the stage's sandbox (`srt`), where the host has one; as written where it has none.
    const launched = (command: string, args: string[] = []) =>
      MISSING_SANDBOX_PACKAGES.length > 0
        ? { command, ...(args.length > 0 ? { args } : {}) }
        : { command: process.execPath, args: [expect.stringMatching(/sandbox-runtime\/dist\/cli\.js$/), '--settings', path.join(attempt.stageDir, 'mcp-sandbox.json'), '--', 'env', '--', command, ...args] };
    expect(config).toEqual({ mcpServers: { tools: launched('false'), shared: launched('true', ['--stdio']) } });
    expect(outcome.warnings.join('\n')).toMatch(/MCP server\(s\) .*(tools|shared).* failed to start/);
  });

  test('fails before the agent starts when an MCP server command is not installed', async () => {
    const before = world.server.requests().length;
    const attempt = await world.start({ task: 'Task: mcp', stage: { mcpServers: { search: { command: 'no-such-mcp-server', args: [] } } } });
    const failure = await failureOf(attempt.outcome);
    expect(failure).toMatchObject({ type: 'CONFIG_INVALID', nonRetryable: true });
    expect(failure.message).toContain('MCP server "search" runs the command "no-such-mcp-server", which is not installed');
    expect(failure.message).toContain('mcpServers.search.command of stage work');
    expect(world.server.requests().length).toBe(before);
  });

  test('resumes the previous attempt\'s session, or a continuation\'s, and says so to the agent', async () => {
    const first = await (await world.start({ task: 'Task: resume', runId: 'resume-run' })).outcome;
    expect(first.text).toContain('First answer.');

    const retried = await world.start({ task: 'Task: resume', runId: 'resume-run', request: { attempt: 2, resumeSessionId: first.sessionId } });
    const second = await retried.outcome;
    expect(second).toMatchObject({ sessionId: first.sessionId, warnings: [] });
    expect(second.text).toContain('Second answer.');
    const resumed = requestsOf('resume').at(-1) as RecordedRequest;
    expect(resumed.turn).toBe(1);
    expect(userText(resumed, 'last')).toContain('Your previous attempt at this task (attempt 1) was interrupted');

    const continuation = { kind: 'answer' as const, sessionId: first.sessionId, message: 'The person answered: use blue.' };
    const answered = await (await world.start({ task: 'Task: resume', runId: 'resume-run', request: { continuation } })).outcome;
    expect(answered).toMatchObject({ sessionId: first.sessionId, warnings: [] });
    expect(answered.text).toContain('Third answer.');
    expect(userText(requestsOf('resume').at(-1) as RecordedRequest, 'last')).toBe('The person answered: use blue.');
  });

  test('starts afresh with a warning when the session to resume cannot be found', async () => {
    const missing = '00000000-0000-4000-8000-00000000abcd';
    const attempt = await world.start({
      task: 'Task: resume',
      request: { attempt: 2, resumeSessionId: missing, continuation: { kind: 'rework', sessionId: missing, message: 'Reviewer: add tests.' } },
    });
    const outcome = await attempt.outcome;
    expect(outcome.sessionId).not.toBe(missing);
    expect(outcome.text).toContain('First answer.');
    expect(outcome.warnings).toEqual([expect.stringMatching(new RegExp(`session ${missing} could not be found .* started a new session`))]);
    // The fresh session gets the task and the continuation's message together.
    const request = requestsOf('resume').at(-1) as RecordedRequest;
    expect(request.turn).toBe(0);
    expect(userText(request, 'first')).toContain('Task: resume');
    expect(userText(request, 'first')).toContain('Reviewer: add tests.');
  });

  test('stops an earlier attempt still working in the stage before its own agent starts', async () => {
    const earlier = await world.start({ task: 'Task: guard, first', runId: 'guard-run', stage: { allowedTools: ['Bash'] } });
    const running = await waitFor(() => stageProcesses(earlier.stageDir), (pids) => pids.length >= 2, 'the first agent and its tool');
    const { pid } = JSON.parse(await readFile(path.join(earlier.stageDir, 'agent.lock'), 'utf8')) as { pid: number };

    // The same stage again, as when Temporal retries an attempt whose worker it gave up on.
    const attempt = await world.start({ task: 'Task: guard, second', runId: 'guard-run', request: { attempt: 2 } });
    const outcome = await attempt.outcome;
    expect(outcome.text).toContain('Alone in the stage.');
    expect(outcome.warnings).toEqual([expect.stringMatching(new RegExp(`^stopped the agent of attempt 1 \\(pid ${pid}\\) and \\d+ process\\(es\\) an earlier attempt left running in this stage`))]);
    expect(await failureOf(earlier.outcome)).toMatchObject({ type: 'CLI_CRASHED' });
    expect((await stageProcesses(earlier.stageDir)).filter((p) => running.includes(p))).toEqual([]);
    expect(existsSync(path.join(attempt.stageDir, 'agent.lock'))).toBe(false);
  });
});
