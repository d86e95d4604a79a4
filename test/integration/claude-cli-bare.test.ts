import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { toFolderName } from '../../src/activities/workspace/run-folder.js';
import { createCliWorld, failureOf, REPORT, type CliWorld } from './claude-cli-world.js';

/*
 * `bare: true` runs `claude --bare`: the CLI skips CLAUDE.md discovery (and hooks, plugins, auto-memory), so what
 * reaches the model is only what the stage passes explicitly: its system prompt file and its prompt.
 */

const HOUSE_RULE = 'HOUSE RULE 4711: always answer in haiku';
let world: CliWorld;

beforeAll(async () => {
  world = await createCliWorld({ rules: [{ match: 'Task: bare', turns: [{ text: `Done.\n${REPORT}` }], repeatLastTurn: true }] });
});
afterAll(async () => {
  await world?.close();
});

/** Runs one attempt in a run folder holding a CLAUDE.md; returns the model request's text. */
async function requestText(runId: string, bare: boolean): Promise<string> {
  const folder = path.join(world.root, toFolderName(runId));
  await mkdir(folder, { recursive: true });
  await writeFile(path.join(folder, 'CLAUDE.md'), `${HOUSE_RULE}\n`);
  const before = world.server.requests().length;
  const outcome = await (await world.start({ task: 'Task: bare', runId, stage: { bare } })).outcome;
  expect(outcome.text).toContain(REPORT);
  return JSON.stringify(world.server.requests().slice(before).map((r) => r.body));
}

/** Runs one attempt in a run folder holding `files`; returns the model request's text. */
async function requestTextWith(runId: string, files: Record<string, string>, bare: boolean): Promise<string> {
  const folder = path.join(world.root, toFolderName(runId));
  await mkdir(folder, { recursive: true });
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(folder, name), text);
  const before = world.server.requests().length;
  const outcome = await (await world.start({ task: 'Task: bare', runId, stage: { bare } })).outcome;
  expect(outcome.text).toContain(REPORT);
  return JSON.stringify(world.server.requests().slice(before).map((r) => r.body));
}

// examples/agent-execution/README.md tells teams whose agents follow an AGENTS.md in the worktree that it is read.
describe('a workspace AGENTS.md', () => {
  const AGENTS_RULE = 'AGENTS RULE 0815: name every test after its acceptance criterion';
  test('reaches the agent as project instructions, as CLAUDE.md does, and is left out under bare: true', async () => {
    expect(await requestTextWith('run-agents', { 'AGENTS.md': `${AGENTS_RULE}\n` }, false)).toContain(AGENTS_RULE);
    expect(await requestTextWith('run-agents-bare', { 'AGENTS.md': `${AGENTS_RULE}\n` }, true)).not.toContain(AGENTS_RULE);
  });
});

describe('bare: true', () => {
  test('leaves the workspace CLAUDE.md out of the request, and keeps the stage\'s own system prompt and task', async () => {
    const normal = await requestText('run-normal', false);
    expect(normal).toContain(HOUSE_RULE);
    const bare = await requestText('run-bare', true);
    expect(bare).not.toContain(HOUSE_RULE);
    expect(bare).toContain('You are a test agent.');
    expect(bare).toContain('Task: bare');
  });

  test('fails as CONFIG_INVALID, naming the variable, when the worker has only ANTHROPIC_AUTH_TOKEN', async () => {
    const attempt = await world.start({ task: 'Task: bare', stage: { bare: true }, env: { ANTHROPIC_API_KEY: undefined, ANTHROPIC_AUTH_TOKEN: 'tok' } });
    const failure = await failureOf(attempt.outcome);
    expect(failure).toMatchObject({ type: 'CONFIG_INVALID', nonRetryable: true });
    expect(failure.message).toContain('ANTHROPIC_API_KEY');
  });
});
