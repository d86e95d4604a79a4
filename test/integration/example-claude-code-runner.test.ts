import { existsSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { mkdtemp, readFile, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { git, initRepo } from '../helpers/git-repo.js';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

const EXAMPLE = path.join(PROJECT_ROOT, 'examples', 'claude-code-runner');
const PIPELINE = path.join(EXAMPLE, 'pipeline.yaml');

describe('the claude-code-runner example', () => {
  let harness: Harness;
  let scenario: ScenarioInput;
  let base: string;
  let repo: string;
  /** The caller's working directory: a git worktree of its repository, made afresh for each run. */
  let worktrees = 0;
  const newWorktree = async (): Promise<string> => {
    const worktree = path.join(base, `task-${++worktrees}`);
    await git(repo, 'worktree', 'add', '--quiet', '-b', `task-${worktrees}`, worktree);
    return worktree;
  };
  beforeAll(async () => {
    harness = await createHarness('example-ccr', { scenario: path.join(EXAMPLE, 'scenario.yaml') });
    scenario = parse(await readFile(path.join(EXAMPLE, 'scenario.yaml'), 'utf8')) as ScenarioInput;
    // In the system's temp folder, which the test worker allows (AGENT_PIPELINE_ALLOWED_PATHS).
    base = await mkdtemp(path.join(tmpdir(), 'ccr-caller-'));
    repo = path.join(base, 'atlas');
    await initRepo(repo, { 'README.md': '# ATLAS\n' });
  });
  afterAll(async () => {
    await harness?.close();
    if (base) await rm(base, { recursive: true, force: true });
  });

  test('runs in the caller\'s worktree: plan mode, an appended system prompt and a transient failure retried', async () => {
    const worktree = await newWorktree();
    const state = await harness.finish(await harness.start(PIPELINE, { worktree }));
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    // The agents worked in the caller's worktree; the worker left its changes uncommitted on the caller's branch and
    // kept its own bookkeeping elsewhere (Claude Code itself may leave `.claude/.cc-writes`).
    expect(state.workspace).toBe(await realpath(worktree));
    expect(await readFile(path.join(worktree, 'version.txt'), 'utf8')).toBe('1.4.2\n');
    expect(await git(worktree, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('task-1');
    expect(await git(worktree, 'log', '--format=%s')).toBe('initial');
    const changed = (await git(worktree, 'status', '--porcelain', '--untracked-files=all')).split('\n').filter((line) => line !== '?? .claude/.cc-writes');
    expect(changed.sort()).toEqual(['?? cli.js', '?? version.txt']);
    expect(existsSync(path.join(worktree, '.agent-pipeline'))).toBe(false);
    // The repository's own checkout is untouched.
    expect(existsSync(path.join(repo, 'cli.js'))).toBe(false);
    const requests = harness.modelServer.requests().filter((r) => r.path === '/v1/messages');
    const body = (rule: string): string => JSON.stringify(requests.find((r) => r.rule === rule && r.status === 200)?.body);
    // --permission-mode plan reached the CLI: its requests carry plan mode's instructions; the others do not.
    expect(body('analyze')).toContain('Plan mode is active');
    expect(body('implement')).not.toContain('Plan mode is active');
    // --append-system-prompt reached the model's system prompt.
    expect(body('implement')).toContain('You are working on an ATLAS task in a git worktree.');
    // The 529 failed the first attempt; the retry (a new attempt, after backoff) succeeded.
    expect(requests.filter((r) => r.rule === 'validate').map((r) => r.status)).toEqual([529, 200, 200]);
    expect(stageOf(state, 'validate').totals?.attempts).toBe(2);
    // What the story parsed from the CLI's JSON result is in every stage result.
    const implement = stageOf(state, 'implement').result!;
    expect(implement.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(implement.numTurns).toBeGreaterThanOrEqual(2);
    expect(implement.durationMs).toBeGreaterThan(0);
    expect(implement.costUsd).toBeGreaterThan(0);
    expect(stageOf(state, 'validate').result?.outputs).toEqual({ works: true });
  });

  test('returns the agent\'s final answer, as ClaudeCodeRunner returns its Output, with the model chosen per request', async () => {
    harness.modelServer.setScenario(scenario);
    const state = await harness.finish(await harness.start(PIPELINE, { worktree: await newWorktree(), model: 'haiku', timeout: '20m' }));
    expect(state.status).toBe('completed');
    // WithModel: the input `model` reached every stage's CLI (`defaults.model: "{{inputs.model}}"`).
    const models = harness.modelServer.requests().filter((r) => r.path === '/v1/messages' && r.rule === 'validate').map((r) => (r.body as { model?: string }).model);
    expect(models.length).toBeGreaterThan(0);
    for (const model of models) expect(model).toMatch(/haiku/);
    // The answer text without the report block, in the stage result (`status --json`, the library's results).
    expect(stageOf(state, 'validate').result?.answer).toBe('It prints 1.4.2.');
  });

  test('does not retry an authentication failure', async () => {
    harness.modelServer.setScenario({ ...scenario, requireApiKey: 'sk-another-key' });
    const state = await harness.finish(await harness.start(PIPELINE, { worktree: await newWorktree() }));
    expect(state.status).toBe('failed');
    expect(state.error?.type).toBe('API_KEY_REJECTED');
    expect(stageOf(state, 'analyze').totals?.attempts).toBe(1);
    expect(state.error?.message).toContain('check ANTHROPIC_API_KEY');
  });

  test('stops a stage at its budget cap without retrying it', async () => {
    // A text-only turn: a budget stop in the middle of a tool call would kill the tool's shell.
    const expensive = (scenario.rules ?? []).map((rule) =>
      rule.name === 'implement' ? { ...rule, turns: [{ text: 'A long and expensive answer.', usage: { input_tokens: 1_000_000, output_tokens: 200 } }] } : rule,
    );
    harness.modelServer.setScenario({ ...scenario, rules: expensive });
    const state = await harness.finish(await harness.start(PIPELINE, { worktree: await newWorktree() }));
    expect(state.status).toBe('failed');
    expect(state.error?.type).toBe('BUDGET_EXCEEDED');
    expect(state.error?.message).toContain('Reached maximum budget ($2)');
    expect(stageOf(state, 'implement').totals?.attempts).toBe(1);
    expect(stageOf(state, 'validate').status).toBe('skipped');
  });
});
