import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { answerStageUpdate } from '../../src/contracts/messages.js';
import { git, initRepo } from '../helpers/git-repo.js';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, stageOf, waitForWaiting } from './workflow-helpers.js';

const EXAMPLE = path.join(PROJECT_ROOT, 'examples', 'agent-execution');

describe('the agent-execution example', () => {
  let harness: Harness;
  let project: string;
  beforeAll(async () => {
    harness = await createHarness('example-agent-exec', { scenario: path.join(EXAMPLE, 'scenario.yaml') });
    // The example lives at the root of the project's repository; each run works in a worktree of it.
    project = await mkdtemp(path.join(tmpdir(), 'agent-execution-'));
    await cp(EXAMPLE, project, { recursive: true });
    await initRepo(project);
  });
  afterAll(async () => {
    await harness?.close();
    await rm(project, { recursive: true, force: true });
  });

  test('answers the agent\'s question, and fixes what the failed test stage found, in the bead\'s worktree', { timeout: 240_000 }, async () => {
    const handle = await harness.start(path.join(project, 'pipeline.yaml'));
    const waiting = await waitForWaiting(handle, 'implement', 'answer', 120_000);
    expect(stageOf(waiting, 'implement').waitingFor?.question).toBe('Should greet() end with an exclamation mark or a full stop?');
    await handle.executeUpdate(answerStageUpdate, { args: [{ stage: 'implement', text: 'A full stop.' }] });
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    // The test step is a command: the real `node --test` failed, no model was asked.
    expect(stageOf(state, 'test')).toMatchObject({ status: 'failed', backend: 'command', attempt: 1, error: { type: 'COMMAND_FAILED' } });
    expect(stageOf(state, 'fix').status).toBe('completed');

    // The bead's worktree, on its own branch, holds the fixed code.
    expect(state.workspace).toBe(harness.runDir(handle.workflowId));
    expect(await git(state.workspace!, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('coven/cv-12');
    expect(await readFile(path.join(state.workspace!, 'greet.js'), 'utf8')).toContain('`Hello, ${name}.`');

    const requests = harness.modelServer.requests().filter((r) => r.path === '/v1/messages' && r.status === 200);
    const bodyOf = (rule: string, turn: number): string => JSON.stringify(requests.find((r) => r.rule === rule && r.turn === turn)?.body);
    // The spell came from spells/, wrapped in the system prompt override.
    expect(bodyOf('implement', 0)).toContain('in its own git worktree. The repository');
    // The person's answer continued the agent's session; the pipeline's MCP server answered the agent's tool call.
    expect(bodyOf('implement', 2)).toContain('A full stop.');
    expect(bodyOf('implement', 1)).toContain('Bead cv-12: open, priority 2.');
    expect(requests.filter((r) => r.rule !== 'implement' && r.rule !== 'fix')).toEqual([]);
    // The fix stage was told what the tests found (the test runner's report), and had the pipeline's and its own MCP servers.
    const fix = bodyOf('fix', 0);
    expect(fix).toContain('exited with code 1');
    expect(fix).toContain('greets with a full stop');
    expect(fix).toContain("+ 'Hello, Ada!'");
    expect(fix).toContain('mcp__beads__bead_show');
    expect(fix).toContain('mcp__docs__doc_search');
    expect(bodyOf('implement', 0)).not.toContain('mcp__docs__doc_search');
  });
});
