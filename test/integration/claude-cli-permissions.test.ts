import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { runCli } from './cli-helpers.js';
import { expectNoStageLeftRunning, stageOf, waitForWaiting } from './workflow-helpers.js';

/*
 * Issue 10 item 7: permission settings end to end, with the real `claude`, a real worker and the real
 * `agent-pipeline approve` command: `permissionMode: plan` keeps the agent from changing files, and a stage whose tool
 * calls were denied waits until `approve --allow-all` lets the agent make them, in the same session.
 */

const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const write = (file: string, content: string) => ({ tool: { name: 'Write', input: { file_path: file, content } } });

let harness: Harness;

beforeAll(async () => {
  harness = await createHarness('claude-cli-permissions', {
    scenario: {
      rules: [
        { name: 'plan', match: 'Pipeline: planned ·', turns: [write('plan-output.md', 'should not be written\n'), { text: report('Planned only.') }] },
        { name: 'refused', match: 'Pipeline: refused ·', turns: [write('notes.md', 'never written\n'), { text: report('Could not write.') }] },
        {
          name: 'ask',
          match: 'Pipeline: asked ·',
          // Tool-only turns: each is exactly one assistant message, so the resumed session asks for turn 2.
          turns: [write('notes.md', 'written after approval\n'), { text: report('Could not write.') }, write('notes.md', 'written after approval\n'), { text: report('Wrote notes.md.') }],
        },
      ],
    },
  });
});
afterAll(async () => {
  await harness?.close();
});

const HEADER = (name: string): string =>
  `name: ${name}\ndefaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 30s, stallTimeout: 2m, retries: 0 }\nstages:\n`;

describe('permission settings of a CLI stage', () => {
  test('permissionMode: plan lets the agent plan but not write files', { timeout: 180_000 }, async () => {
    // Write is allowed: only plan mode keeps the agent from writing.
    const handle = await harness.startYaml('planned', `${HEADER('planned')}  - id: plan\n    prompt: Plan the work.\n    permissionMode: plan\n    allowedTools: [Read, Write]\n`);
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    expect(existsSync(path.join(state.workspace!, 'plan-output.md'))).toBe(false);
    const requests = harness.modelServer.requests().filter((r) => r.rule === 'plan');
    // The CLI refused the Write and said why.
    expect(requests).toHaveLength(2);
    const toolResult = JSON.stringify((requests[1].body as { messages: unknown[] }).messages.at(-1));
    expect(toolResult).toContain('tool_result');
    expect(toolResult).toMatch(/"is_error":true/);
  });

  test('denied tool calls wait for a person; `approve --allow-all` resumes the session with them allowed', { timeout: 180_000 }, async () => {
    const yaml = `${HEADER('asked')}  - id: notes\n    prompt: Write notes.\n    permissionMode: dontAsk\n    allowedTools: [Read]\n    onPermissionDenied: ask\n`;
    const handle = await harness.startYaml('asked', yaml);
    const waiting = await waitForWaiting(handle, 'notes', 'permission', 120_000);
    const wait = stageOf(waiting, 'notes').waitingFor!;
    expect(wait.denials?.map((d) => d.tool)).toEqual(['Write']);
    expect(wait.commands).toContain(`agent-pipeline approve ${handle.workflowId} --stage notes --allow-all`);
    expect(existsSync(path.join(waiting.workspace!, 'notes.md'))).toBe(false);

    const approved = await runCli(['approve', handle.workflowId, '--stage', 'notes', '--allow-all'], harness.env);
    expect(approved.exitCode, approved.stderr).toBe(0);
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    expect(stageOf(state, 'notes').result?.summary).toBe('Wrote notes.md.');
    expect(await readFile(path.join(state.workspace!, 'notes.md'), 'utf8')).toBe('written after approval\n');
    const requests = harness.modelServer.requests().filter((r) => r.rule === 'ask');
    // One session throughout: the continuation resumed it rather than starting over.
    expect(new Set(requests.map((r) => r.headers['x-claude-code-session-id'])).size).toBe(1);
  });

  test('onPermissionDenied: fail fails the stage, naming the denied tool and the fix', { timeout: 180_000 }, async () => {
    const yaml = `${HEADER('refused')}  - id: notes\n    prompt: Write notes.\n    permissionMode: dontAsk\n    allowedTools: [Read]\n    onPermissionDenied: fail\n`;
    const state = await harness.finish(await harness.startYaml('refused', yaml));
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('failed');
    expect(state.error?.type).toBe('PERMISSION_DENIED');
    expect(state.error?.message).toContain("the agent's calls to Write were denied");
    expect(state.error?.message).toContain('allowedTools');
    expect(existsSync(path.join(state.workspace!, 'notes.md'))).toBe(false);
  });
});
