import type { WorkflowFailedError } from '@temporalio/client';
import type { ApplicationFailure } from '@temporalio/common';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { answerStageUpdate, approveStageUpdate, rejectStageUpdate } from '../../src/contracts/messages.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, stageOf, waitForWaiting } from './workflow-helpers.js';

/* Answers and granted tools resume the real `claude` CLI's session (the scripted model sees the same conversation). */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const WRITE_NOTE = { name: 'Bash', input: { command: 'echo granted > note.txt', description: 'Write the note' } };

const RULES: Rule[] = [
  {
    name: 'question',
    match: 'Pipeline: question · Stage: ask ·',
    turns: [{ text: 'BLOCKED: Should the greeting be formal?' }, { text: report('Wrote a formal greeting.') }],
  },
  {
    name: 'denied',
    match: 'Pipeline: denied · Stage: write ·',
    // Bash is not allowed at first: the CLI denies the call, the agent reports, and the run asks a person.
    turns: [{ tool: WRITE_NOTE }, { text: report('Could not write the note.') }, { tool: WRITE_NOTE }, { text: report('Wrote the note.') }],
  },
];

const PIPELINE = (name: string, stage: string, extra = ''): string =>
  [
    `name: ${name}`,
    'defaults: { backend: claude-cli, model: sonnet, retries: 0, permissionMode: dontAsk, heartbeatTimeout: 30s }',
    'stages:',
    `  - id: ${stage}`,
    `    prompt: Do ${stage}.`,
    '    allowedTools: [Read]',
    extra,
  ].join('\n');

describe('continuing a claude-cli session', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('sessions', { scenario: { rules: RULES } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  test('an answer resumes the same Claude session', async () => {
    const handle = await harness.startYaml('question', PIPELINE('question', 'ask'));
    const waiting = await waitForWaiting(handle, 'ask', 'answer');
    const sessionId = stageOf(waiting, 'ask').result?.sessionId;
    expect(sessionId).toBeTruthy();
    await handle.executeUpdate(answerStageUpdate, { args: [{ stage: 'ask', text: 'Yes, formal.' }] });
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    expect(stageOf(state, 'ask').result).toMatchObject({ summary: 'Wrote a formal greeting.', sessionId });
    const resumed = harness.modelServer.requests().find((r) => r.rule === 'question' && r.turn === 1);
    expect(JSON.stringify((resumed?.body as { messages: unknown[] }).messages)).toContain('Yes, formal.');
  });

  test('denied tool calls wait for a person; `approve --allow` resumes the session with the tool allowed', async () => {
    const handle = await harness.startYaml('denied', PIPELINE('denied', 'write', '    onPermissionDenied: ask'));
    const waiting = await waitForWaiting(handle, 'write', 'permission');
    const wait = stageOf(waiting, 'write').waitingFor!;
    expect(wait.denials).toEqual([{ tool: 'Bash', input: expect.objectContaining({ command: 'echo granted > note.txt' }) }]);
    expect(wait.commands).toContain(`agent-pipeline approve ${handle.workflowId} --stage write --allow Bash`);
    const refused = await handle.executeUpdate(approveStageUpdate, { args: [{ stage: 'write' }] }).then(() => undefined, (e: unknown) => e as Error);
    expect(String((refused?.cause as Error | undefined)?.message)).toContain('say which tools to allow');

    await handle.executeUpdate(approveStageUpdate, { args: [{ stage: 'write', allowTools: ['Bash'] }] });
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(stageOf(state, 'write')).toMatchObject({ status: 'completed', result: { summary: 'Wrote the note.' } });
    expect(await readFile(path.join(state.workspace!, 'note.txt'), 'utf8')).toBe('granted\n');
  });

  test('rejecting denied tool calls fails the stage', async () => {
    const handle = await harness.startYaml('denied', PIPELINE('denied', 'write', '    onPermissionDenied: ask'));
    await waitForWaiting(handle, 'write', 'permission');
    await handle.executeUpdate(rejectStageUpdate, { args: [{ stage: 'write', reason: 'no shell for you' }] });
    const error = await handle.result().then(() => undefined, (e: unknown) => e as WorkflowFailedError);
    expect((error?.cause as ApplicationFailure).type).toBe('REJECTED');
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(stageOf(state, 'write').error?.message).toBe('[REJECTED] a person rejected stage write: no shell for you');
  });
});
