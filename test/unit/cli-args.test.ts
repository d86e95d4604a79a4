import { describe, expect, test } from 'vitest';
import type { BackendRequest } from '../../src/activities/backends/stage-backend.js';
import { agentEnvironment, buildCliArgs, streamJsonPrompt } from '../../src/activities/backends/claude-cli/args.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';
import type { StageDefinition } from '../../src/pipeline/stage-schema.js';

function requestFor(stage: Partial<StageDefinition>, extra: Partial<BackendRequest> = {}): BackendRequest {
  const definition: StageDefinition = { id: 'work', prompt: 'x', ...stage };
  return {
    stage: resolveStage({ name: 'p', stages: [definition] }, definition),
    prompt: { system: 'persona', user: 'task' },
    workspace: { dir: '/w', claudeConfigDir: '/w/.agent-pipeline/claude', stageDir: (id) => `/w/.agent-pipeline/stages/${id}` },
    attempt: 1,
    transcriptPath: '/w/t.jsonl',
    signal: new AbortController().signal,
    heartbeat: () => undefined,
    claimFile: () => undefined,
    ...extra,
  } as BackendRequest;
}

const FRESH = { sessionId: 'sess-1', resume: false, stdin: 'task', warnings: [] };

describe('buildCliArgs', () => {
  test('adds --bare for `bare: true`, and stream-json input for a process started ahead of time', () => {
    const args = buildCliArgs(requestFor({ bare: true }), FRESH, { streamInput: true });
    expect(args.slice(0, 7)).toEqual(['-p', '--output-format', 'stream-json', '--verbose', '--include-partial-messages', '--model=sonnet', '--bare']);
    expect(args.slice(-2)).toEqual(['--input-format', 'stream-json']);
    expect(buildCliArgs(requestFor({}), FRESH, {})).not.toContain('--bare');
    expect(JSON.parse(streamJsonPrompt('line one\nline "two"'))).toEqual({ type: 'user', message: { role: 'user', content: 'line one\nline "two"' } });
  });

  test('passes every stage option as its flag, and never the prompt', () => {
    const request = requestFor(
      { model: 'opus', fallbackModel: 'sonnet', permissionMode: 'acceptEdits', allowedTools: ['Bash', 'Edit'], disallowedTools: ['WebFetch'], maxBudgetUsd: 5 },
      { maxBudgetUsd: 1.5, addDirs: ['/data', '/docs'] },
    );
    expect(buildCliArgs(request, FRESH, { mcpConfig: '/s/mcp-config.json', systemPrompt: '/s/system-prompt.md', settings: '/s/settings.json' })).toEqual([
      '-p', '--output-format', 'stream-json', '--verbose', '--include-partial-messages', '--model=opus',
      '--session-id', 'sess-1',
      '--permission-mode', 'acceptEdits',
      '--allowedTools=Bash', '--allowedTools=Edit',
      '--disallowedTools=WebFetch',
      '--fallback-model=sonnet',
      '--max-budget-usd', '1.5',
      '--strict-mcp-config', '--mcp-config=/s/mcp-config.json',
      '--add-dir=/data', '--add-dir=/docs',
      '--append-system-prompt-file=/s/system-prompt.md',
      '--settings=/s/settings.json',
    ]);
  });

  test('a value from a pipeline or an approval that looks like a flag stays the value of its own flag', () => {
    // Issue 19: `allowedTools: ["--dangerously-skip-permissions"]` or `approve --allow=--settings=…` must not become flags.
    const request = requestFor(
      { model: '--dangerously-skip-permissions', allowedTools: ['Read', '--dangerously-skip-permissions'], disallowedTools: ['--settings={}'] },
      { addDirs: ['--add-dir=/'] },
    );
    const args = buildCliArgs(request, FRESH, {});
    const flags = args.filter((arg) => arg.startsWith('-'));
    // Every argument starting with `-` is one of ours, carrying the value after its own `=`.
    expect(args.filter((arg) => arg === '--dangerously-skip-permissions' || arg.startsWith('--settings'))).toEqual([]);
    expect(flags).toContain('--allowedTools=--dangerously-skip-permissions');
    expect(flags).toContain('--disallowedTools=--settings={}');
    expect(flags).toContain('--model=--dangerously-skip-permissions');
    expect(flags).toContain('--add-dir=--add-dir=/');
    // No argument is a bare value: each is a flag, or follows one that takes a fixed value we chose.
    const values = args.filter((arg, i) => !arg.startsWith('-') && !['--output-format', '--session-id', '--permission-mode'].includes(args[i - 1]));
    expect(values).toEqual([]);
  });

  test('resumes a session and falls back to the stage budget and unattended permissions', () => {
    const args = buildCliArgs(requestFor({ maxBudgetUsd: 2 }), { ...FRESH, resume: true }, {});
    expect(args).toEqual([
      '-p', '--output-format', 'stream-json', '--verbose', '--include-partial-messages', '--model=sonnet',
      '--resume', 'sess-1', '--permission-mode', 'dontAsk', '--max-budget-usd', '2', '--strict-mcp-config',
    ]);
  });
});

describe('agentEnvironment', () => {
  test('passes an allow-list plus the key, the run\'s config dir, short CLI retries and the markers', () => {
    const env = agentEnvironment(
      { PATH: '/bin', HOME: '/root', ANTHROPIC_API_KEY: 'sk-1', TEMPORAL_API_KEY: 'temporal-secret', DATABASE_PASSWORD: 'x' },
      '/w/.claude',
      { stage: '/w/.agent-pipeline/stages/work', worker: 'tok' },
    );
    expect(env).toEqual({
      PATH: '/bin',
      HOME: '/root',
      ANTHROPIC_API_KEY: 'sk-1',
      CLAUDE_CONFIG_DIR: '/w/.claude',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      CLAUDE_CODE_MAX_RETRIES: '0',
      AGENT_PIPELINE_STAGE: '/w/.agent-pipeline/stages/work',
      AGENT_PIPELINE_WORKER: 'tok',
    });
  });
});
