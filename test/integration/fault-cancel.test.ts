import { CancelledFailure, WorkflowFailedError } from '@temporalio/client';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { runCli } from './cli-helpers.js';
import { processesWorkingIn, waitForRequest } from './fault-helpers.js';
import { expectNoStageLeftRunning, stageOf, summarize } from './workflow-helpers.js';

/* A person cancels a run mid-stage, and the model API answers with a storm of errors: real worker, real CLI. */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const RULES: Rule[] = [
  {
    name: 'cancel',
    match: 'Pipeline: cancelled · Stage: write ·',
    turns: [
      { text: 'First part.', tool: { name: 'Bash', input: { command: 'echo partial > partial.txt', description: 'Write the first part' } } },
      // A long, slow answer: the run is cancelled while it streams.
      { text: 'Still writing. '.repeat(120), chunks: 120, chunkDelayMs: 250 },
    ],
  },
  {
    name: 'storm',
    match: 'Pipeline: storm · Stage: call ·',
    turns: [
      {
        text: report('Got through.'),
        failFirst: [
          { status: 429, retryAfter: 1 },
          { status: 429, retryAfter: 1 },
          { status: 529, type: 'overloaded_error' },
          { status: 500 },
        ],
      },
    ],
  },
];

const PIPELINE = (name: string, stage: string, extra = ''): string =>
  `name: ${name}\ndefaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 5s, permissionMode: dontAsk, allowedTools: [Bash] }\nstages:\n  - id: ${stage}\n    prompt: Do ${stage}.\n${extra}`;

describe('cancellation and API errors', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('fault-cancel', { scenario: { rules: RULES } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  test('cancelling mid-stage stops the agent, keeps its partial work and ends the run cancelled with a report', async () => {
    const file = await harness.writePipeline('cancelled', PIPELINE('cancelled', 'write', '    retries: 0\n  - id: after\n    needs: [write]\n    prompt: Never runs.\n'));
    const handle = await harness.start(file);
    await waitForRequest(harness.modelServer, (r) => r.rule === 'cancel' && r.turn === 1, 90_000);
    const cancelled = await runCli(['cancel', handle.workflowId], harness.env);
    expect(cancelled.exitCode, String(cancelled.stderr)).toBe(0);

    const error = await handle.result().then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    const cause = (error as WorkflowFailedError).cause;
    expect(cause).toBeInstanceOf(CancelledFailure);
    // The report: the final state, as `status` and the Web UI show it.
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(summarize(state)).toMatchObject({
      status: 'cancelled',
      error: { type: 'CANCELLED' },
      stages: [{ id: 'write', status: 'cancelled' }, { id: 'after', status: 'skipped', skip: 'the run was cancelled' }],
    });
    const workspace = harness.runDir(handle.workflowId);
    expect(await readFile(path.join(workspace, 'partial.txt'), 'utf8')).toBe('partial\n');
    // WAIT_CANCELLATION_COMPLETED: the run ends only after the activity stopped its agent.
    expect(await processesWorkingIn(workspace)).toEqual([]);
  });

  test('a storm of 429s (with retry-after), 529s and 500s still ends in a completed run', async () => {
    const file = await harness.writePipeline('storm', PIPELINE('storm', 'call', '    retries: 6\n'));
    const handle = await harness.start(file);
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    expect(stageOf(state, 'call').result?.summary).toBe('Got through.');
    const statuses = harness.modelServer.requests().filter((r) => r.rule === 'storm').map((r) => r.status);
    expect(statuses).toEqual([429, 429, 529, 500, 200]);
  });
});
