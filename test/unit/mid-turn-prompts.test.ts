import { describe, expect, test } from 'vitest';
import type { BackendRequest } from '../../src/activities/backends/stage-backend.js';
import { buildCliArgs } from '../../src/activities/backends/claude-cli/args.js';
import { PromptBridge, type ControlRequest, type PromptAsk } from '../../src/activities/backends/claude-cli/control-protocol.js';
import { PROMPT_INPUT_CAP, summariseToolInput, type AgentPromptDecision } from '../../src/pipeline/agent-prompt.js';
import type { StageDefinition } from '../../src/pipeline/stage-schema.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';

/*
 * The parts of mid-turn prompts (docs/permission-prompts.md) that need no CLI: the command line of a stage that asks,
 * the control_response lines a decision becomes, and the check that the stage timeout outlasts a prompt's deadline.
 * The whole path, with the real CLI, is test/integration/claude-cli-mid-turn-prompts.test.ts.
 */

function requestFor(stage: Partial<StageDefinition>): BackendRequest {
  const definition: StageDefinition = { id: 'work', prompt: 'x', ...stage };
  return { stage: resolveStage({ name: 'p', stages: [definition] }, definition) } as BackendRequest;
}
const FRESH = { sessionId: 'sess-1', resume: false, stdin: 'task', warnings: [] };

const canUseTool = (id: string, tool: string, input: Record<string, unknown>): ControlRequest => ({
  type: 'control_request',
  request_id: id,
  request: { subtype: 'can_use_tool', tool_name: tool, input, tool_use_id: `toolu_${id}` },
});
const response = (line: string): unknown => JSON.parse(line);

describe('the command line of a stage that asks', () => {
  test('routes permission requests to the host over stream-json, and asks instead of refusing in the default mode', () => {
    const args = buildCliArgs(requestFor({ onPermissionRequest: 'ask', allowedTools: ['Read'] }), FRESH, {});
    expect(args.join(' ')).toContain('--permission-mode manual --permission-prompt-tool stdio');
    expect(args.filter((a) => a === '--input-format')).toHaveLength(1);
    expect(args.slice(-2)).toEqual(['--input-format', 'stream-json']);
    // Started ahead of time, it still reads stream-json once.
    expect(buildCliArgs(requestFor({ onPermissionRequest: 'ask' }), FRESH, { streamInput: true }).filter((a) => a === '--input-format')).toHaveLength(1);
    // A mode the stage chose stays; a stage that does not ask keeps dontAsk and no prompt tool.
    expect(buildCliArgs(requestFor({ onPermissionRequest: 'ask', permissionMode: 'acceptEdits' }), FRESH, {}).join(' ')).toContain('--permission-mode acceptEdits');
    const quiet = buildCliArgs(requestFor({}), FRESH, {});
    expect(quiet.join(' ')).toContain('--permission-mode dontAsk');
    expect(quiet).not.toContain('--permission-prompt-tool');
  });
});

describe('PromptBridge', () => {
  test('turns each decision into the control_response the CLI reads', async () => {
    const decisions: AgentPromptDecision[] = [{ behavior: 'allow' }, { behavior: 'deny', message: 'use the test script' }, { behavior: 'answer', text: 'vitest' }];
    const asked: PromptAsk[] = [];
    const bridge = new PromptBridge(async (ask) => (asked.push(ask), decisions.shift()!));
    const allow = await bridge.answer(canUseTool('r1', 'Bash', { command: 'make build', description: 'build' }));
    expect(response(allow.line)).toEqual({ type: 'control_response', response: { subtype: 'success', request_id: 'r1', response: { behavior: 'allow', updatedInput: { command: 'make build', description: 'build' } } } });
    const deny = await bridge.answer(canUseTool('r2', 'Bash', { command: 'rm -rf dist' }));
    expect(response(deny.line)).toEqual({ type: 'control_response', response: { subtype: 'success', request_id: 'r2', response: { behavior: 'deny', message: 'use the test script' } } });
    const question = { question: 'Which runner?', header: 'Runner', multiSelect: false, options: [{ label: 'vitest', description: 'a' }, { label: 'jest', description: 'b' }] };
    const answer = await bridge.answer(canUseTool('r3', 'AskUserQuestion', { questions: [question] }));
    expect(response(answer.line)).toMatchObject({ response: { request_id: 'r3', response: { behavior: 'allow', updatedInput: { questions: [question], answers: { 'Which runner?': 'vitest' } } } } });
    expect(asked).toEqual([
      { kind: 'tool', tool: 'Bash', input: 'make build' },
      { kind: 'tool', tool: 'Bash', input: 'rm -rf dist' },
      { kind: 'question', tool: 'AskUserQuestion', input: JSON.stringify({ questions: [question] }), questions: [{ question: 'Which runner?', header: 'Runner', options: ['vitest', 'jest'] }] },
    ]);
  });

  test('asks one at a time, remembers --allow-all for the tool, and ends the attempt on a failing decision', async () => {
    let release: (d: AgentPromptDecision) => void = () => {};
    const asked: string[] = [];
    const bridge = new PromptBridge((ask) => {
      asked.push(ask.input);
      return new Promise((resolve) => (release = resolve));
    });
    const first = bridge.answer(canUseTool('a', 'Bash', { command: 'one' }));
    const second = bridge.answer(canUseTool('b', 'Bash', { command: 'two' }));
    await new Promise((r) => setImmediate(r));
    expect(asked).toEqual(['one']);
    release({ behavior: 'allow', allowAll: true });
    expect(response((await first).line)).toMatchObject({ response: { response: { behavior: 'allow' } } });
    // Bash is allowed for the rest of the stage: the second call is not asked.
    expect(response((await second).line)).toMatchObject({ response: { request_id: 'b', response: { behavior: 'allow' } } });
    expect(asked).toEqual(['one']);

    const failing = new PromptBridge(async () => ({ behavior: 'fail', type: 'PERMISSION_TIMED_OUT', message: 'nobody decided' }));
    const outcome = await failing.answer(canUseTool('c', 'Write', { file_path: 'x' }));
    expect(outcome.fail).toEqual({ type: 'PERMISSION_TIMED_OUT', message: 'nobody decided' });
    expect(response(outcome.line)).toMatchObject({ response: { response: { behavior: 'deny', interrupt: true } } });
    const unserved = await failing.answer({ type: 'control_request', request_id: 'd', request: { subtype: 'hook_callback' } });
    expect(response(unserved.line)).toMatchObject({ response: { subtype: 'error', request_id: 'd' } });
  });

  test('a long input is shown capped', () => {
    const long = 'x'.repeat(PROMPT_INPUT_CAP + 10);
    expect(summariseToolInput('Bash', { command: long })).toBe(`${'x'.repeat(PROMPT_INPUT_CAP)}… (${long.length} characters)`);
  });
});

describe('the deadline of a prompt and the stage timeout', () => {
  test('validate refuses a prompt deadline the stage timeout does not outlast, naming the field', () => {
    const stage = (extra: string): string => ['name: p', 'stages:', '  - id: a', '    prompt: x', '    onPermissionRequest: ask', ...extra.split('\n').filter(Boolean)].join('\n');
    expect(pipelineProblems(stage(''))).toEqual([]);
    expect(pipelineProblems(stage('    timeout: 5m'))).toEqual([expect.stringMatching(/^stages\[0\]\.timeout: a permission request waits up to 10m.*timeout of 5m/)]);
    expect(pipelineProblems(stage('    timeout: 1h\n    permissionRequest: { timeout: 2h, onTimeout: fail }'))).toEqual([expect.stringMatching(/^stages\[0\]\.permissionRequest\.timeout: /)]);
    expect(pipelineProblems(stage('    permissionRequest: { onTimeout: allow }'))).toEqual([expect.stringContaining('permissionRequest.onTimeout')]);
    expect(pipelineProblems(`${stage('')}\nfinally:\n  - { id: f, prompt: y, onPermissionRequest: ask, timeout: 1m }`)).toEqual([expect.stringMatching(/^finally\[0\]\.timeout: /)]);
    expect(pipelineProblems(stage('    backend: anthropic-api'))).toEqual([expect.stringMatching(/^stages\[0\]\.onPermissionRequest: only the claude-cli backend asks mid-turn/)]);
  });
});
