import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { inject } from 'vitest';
import { findTemporalCli } from '../../src/dev/temporal-cli.js';
import { PIPELINE_WORKFLOW_TYPE } from '../../src/contracts/messages.js';
import { createHarness, type Harness } from '../helpers/harness.js';

/*
 * Issue 10 item 6: runs started by a client other than ours (here Temporal's own CLI) with a bad input. The workflow
 * checks its input at its first task and fails the run at once as PIPELINE_INVALID, naming the problem; before, such a
 * run stayed "running" for ever (its workflow task failing on every retry), completed with its stage skipped, or
 * failed late inside an activity.
 */

let harness: Harness;
let temporal: string;

beforeAll(async () => {
  temporal = await findTemporalCli();
  harness = await createHarness('workflow-input', { scenario: { rules: [{ name: 'any', match: 'never', turns: [{ text: 'never asked' }] }] } });
});

afterAll(async () => {
  await harness?.close();
});

const stage = (id: string, extra: Record<string, unknown> = {}) => ({ id, prompt: `do ${id}`, ...extra });
const run = (pipeline: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  version: 1,
  pipeline: { name: 'p', ...pipeline },
  baseDir: '/tmp',
  pipelineFile: 'p.yaml',
  inputs: {},
  ...extra,
});

const CASES: [string, unknown, RegExp][] = [
  ['nonsense', { nonsense: true }, /pipeline: is required \(an object\)[\s\S]*unknown field "nonsense"/],
  ['a stage that needs itself', run({ stages: [stage('a', { needs: ['a'] })] }), /pipeline\.stages\[0\]\.needs\[0\]: stage "a" cannot need itself/],
  ['a cycle', run({ stages: [stage('a', { needs: ['b'] }), stage('b', { needs: ['a'] })] }), /dependency cycle: a -> b -> a/],
  ['an unknown backend', run({ stages: [stage('a', { backend: 'gpt-cli' })] }), /pipeline\.stages\[0\]\.backend: "gpt-cli" is not a backend; use claude-cli or anthropic-api/],
  ['wrong types', run({ stages: 'all of them' }), /pipeline\.stages: "all of them" is not a list/],
  ['an unknown field', run({ stages: [stage('a', { colour: 'blue' })] }), /pipeline\.stages\[0\]: unknown field "colour"/],
  ['a missing stage id', run({ stages: [{ prompt: 'x' }] }), /pipeline\.stages\[0\]\.id: is required \(a string\)/],
  ['an unknown version', run({ stages: [stage('a')] }, { version: 2 }), /version: unknown run input version 2/],
];

describe('a run started with a bad input by another client', () => {
  test.each(CASES)('%s: the run fails at once as PIPELINE_INVALID, naming the problem', { timeout: 60_000 }, async (name, input, problem) => {
    const workflowId = `bad-input-${name.replace(/\W+/g, '-')}-${Math.random().toString(36).slice(2, 8)}`;
    await execa(temporal, [
      'workflow', 'start',
      '--address', inject('temporalAddress'),
      '--namespace', 'default',
      '--task-queue', harness.taskQueue,
      '--type', PIPELINE_WORKFLOW_TYPE,
      '--workflow-id', workflowId,
      '--input', JSON.stringify(input),
    ]);
    const handle = harness.client.workflow.getHandle(workflowId);
    // A run stuck retrying its first task would never settle; 30 s is far beyond "at once" even on a loaded box.
    const outcome = await Promise.race([
      handle.result().then(() => 'completed', (err: unknown) => err),
      new Promise((resolve) => setTimeout(() => resolve('still running after 30 s'), 30_000)),
    ]);
    expect(outcome).toBeInstanceOf(WorkflowFailedError);
    const cause = (outcome as WorkflowFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect((cause as ApplicationFailure).type).toBe('PIPELINE_INVALID');
    expect((cause as ApplicationFailure).nonRetryable).toBe(true);
    expect(cause?.message).toMatch(problem);
    expect((await handle.describe()).status.name).toBe('FAILED');
  });
});
