import { WorkflowFailedError, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import { startRun } from '../../src/library/runs.js';
import { loadPipelineFile } from '../../src/library/load-pipeline.js';
import {
  answerStageUpdate,
  approveStageUpdate,
  rejectStageUpdate,
  retryStageUpdate,
  skipStageUpdate,
} from '../../src/contracts/messages.js';
import { COST_USD_ATTRIBUTE, CURRENT_STAGES_ATTRIBUTE, PIPELINE_NAME_ATTRIBUTE, RUN_STATUS_ATTRIBUTE } from '../../src/contracts/search-attributes.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { eventually } from './cli-helpers.js';
import { expectNoStageLeftRunning, stageOf, summarize, waitForWaiting } from './workflow-helpers.js';

/*
 * People in the loop, on the anthropic-api backend (its conversations continue like CLI sessions): questions,
 * failures a person decides, approval gates, budgets and the review-round cap, plus the validators' messages.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string, extra: Record<string, unknown> = {}): string =>
  `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {}, ...extra })}\n\`\`\``;
const rule = (pipeline: string, stage: string, turns: Rule['turns'], repeatLastTurn = false): Rule => ({
  name: `${pipeline}/${stage}`,
  match: `Pipeline: ${pipeline} · Stage: ${stage} ·`,
  turns,
  repeatLastTurn,
});

const RULES: Rule[] = [
  rule('asks', 'plan', [{ text: 'BLOCKED: Which output format do you want, JSON or YAML?' }, { text: report('Planned for YAML.') }]),
  rule('asks', 'other', [{ text: report('other done'), chunks: 10, chunkDelayMs: 200 }]),
  rule('flaky', 'build', [{ text: report('build broke', { success: false, error: 'compiler crashed' }) }, { text: report('built on retry') }]),
  rule('skippable', 'build', [{ text: report('build broke', { success: false, error: 'compiler crashed' }) }]),
  rule('skippable', 'deploy', [{ text: report('deployed anyway') }]),
  rule('gated', 'draft', [{ text: report('drafted') }]),
  rule('gated', 'publish', [{ text: report('published') }]),
  rule('pricey', 'first', [{ text: report('expensive'), usage: { input_tokens: 500_000, output_tokens: 10 } }]),
  rule('pricey', 'second', [{ text: report('cheap') }]),
  rule('picky', 'write', [{ text: report('wrote it') }], true),
  rule('picky', 'review', [{ text: report('still not right', { verdict: 'rework', feedback: ['Too short'] }) }], true),
];

const HEADER = (name: string, extra = ''): string =>
  `name: ${name}\n${extra}defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }\nstages:\n`;
const STAGE = (id: string, extra = ''): string => `  - id: ${id}\n    prompt: Do ${id}.\n${extra}`;

/** The message of an update the workflow's validator rejected. */
async function rejection(promise: Promise<unknown>): Promise<string> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
  const cause = (err as WorkflowUpdateFailedError).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  expect((cause as ApplicationFailure).type).toBe('UPDATE_REJECTED');
  return (cause as ApplicationFailure).message;
}

describe('people in the loop', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('humans', { scenario: { rules: RULES } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  async function end(handle: WorkflowHandle): Promise<{ state: RunState; error?: unknown }> {
    const error = await handle.result().then(() => undefined, (err: unknown) => err);
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    return { state, error };
  }
  const failureType = (error: unknown): string | undefined => ((error as WorkflowFailedError).cause as ApplicationFailure).type ?? undefined;

  test('a question makes the stage wait; a validated answer continues the same conversation', async () => {
    const handle = await harness.startYaml('asks', HEADER('asks') + STAGE('plan') + STAGE('other', '    needs: [plan]\n'));
    const waiting = await waitForWaiting(handle, 'plan', 'answer');
    expect(waiting.status).toBe('blocked');
    expect(stageOf(waiting, 'plan').waitingFor).toMatchObject({
      question: 'Which output format do you want, JSON or YAML?',
      commands: [`agent-pipeline answer ${handle.workflowId} --stage plan "..."`, `agent-pipeline reject ${handle.workflowId} --stage plan --reason "..."`],
    });

    expect(await rejection(handle.executeUpdate(answerStageUpdate, { args: [{ stage: 'nope', text: 'YAML' }] }))).toBe(
      'unknown stage "nope"; stages of this run: plan, other',
    );
    expect(await rejection(handle.executeUpdate(answerStageUpdate, { args: [{ stage: 'other', text: 'YAML' }] }))).toBe(
      'stage "other" is not waiting (it is pending), so there is nothing to answer',
    );
    expect(await rejection(handle.executeUpdate(answerStageUpdate, { args: [{ text: ' ' }] }))).toContain('the answer is empty');
    expect(await rejection(handle.executeUpdate(approveStageUpdate, { args: [{ stage: 'plan' }] }))).toContain(
      'stage "plan" waits for an answer to its question, which `approve` does not give; use agent-pipeline answer',
    );

    // No --stage: exactly one stage waits, so the answer goes to it.
    const after = await handle.executeUpdate(answerStageUpdate, { args: [{ text: 'YAML, please' }] });
    expect(stageOf(after, 'plan').status).toBe('running');
    const { state } = await end(handle);
    expect(state.status).toBe('completed');
    expect(stageOf(state, 'plan').result?.summary).toBe('Planned for YAML.');
    const resumed = harness.modelServer.requests().find((r) => r.rule === 'asks/plan' && r.turn === 1);
    expect(JSON.stringify((resumed?.body as { messages: unknown[] }).messages.at(-1))).toContain('YAML, please');
  });

  test('with onFailure: ask, a failed stage waits and `retry --feedback` continues its conversation', async () => {
    const handle = await harness.startYaml('flaky', HEADER('flaky') + STAGE('build', '    onFailure: ask\n'));
    const waiting = await waitForWaiting(handle, 'build', 'failure');
    expect(stageOf(waiting, 'build').waitingFor?.message).toContain('compiler crashed');
    expect(await rejection(handle.executeUpdate(skipStageUpdate, { args: [{ stage: 'elsewhere' }] }))).toContain('unknown stage "elsewhere"');
    await handle.executeUpdate(retryStageUpdate, { args: [{ stage: 'build', feedback: 'Use the other compiler.' }] });
    const { state } = await end(handle);
    expect(summarize(state)).toMatchObject({ status: 'completed', stages: [{ id: 'build', status: 'completed', attempt: 2 }] });
    const retried = harness.modelServer.requests().find((r) => r.rule === 'flaky/build' && r.turn === 1);
    expect(JSON.stringify((retried?.body as { messages: unknown[] }).messages.at(-1))).toContain('Use the other compiler.');
  });

  test('`skip` moves past a failed stage and its dependents run as if it had completed', async () => {
    const handle = await harness.startYaml('skippable', HEADER('skippable') + STAGE('build', '    onFailure: ask\n') + STAGE('deploy', '    needs: [build]\n'));
    await waitForWaiting(handle, 'build', 'failure');
    await handle.executeUpdate(skipStageUpdate, { args: [{ stage: 'build' }] });
    const { state } = await end(handle);
    expect(summarize(state)).toMatchObject({
      status: 'completed',
      stages: [{ id: 'build', status: 'skipped', skip: 'a person skipped it after it failed' }, { id: 'deploy', status: 'completed' }],
    });
  });

  test('approval gates wait for approve or reject, and a timeout follows its policy', async () => {
    const yaml = HEADER('gated') + STAGE('draft', '    approval: true\n') + STAGE('publish', '    needs: [draft]\n');
    const approved = await harness.startYaml('gated', yaml);
    await waitForWaiting(approved, 'draft', 'approval');
    await approved.executeUpdate(approveStageUpdate, { args: [{ stage: 'draft' }] });
    expect((await end(approved)).state.status).toBe('completed');

    const rejected = await harness.startYaml('gated', yaml);
    await waitForWaiting(rejected, 'draft', 'approval');
    expect(await rejection(rejected.executeUpdate(rejectStageUpdate, { args: [{ stage: 'draft', reason: '' }] }))).toContain('the reason is empty');
    await rejected.executeUpdate(rejectStageUpdate, { args: [{ reason: 'wrong tone' }] });
    const { state, error } = await end(rejected);
    expect(failureType(error)).toBe('REJECTED');
    expect(summarize(state)).toMatchObject({
      status: 'failed',
      stages: [{ id: 'draft', status: 'failed', error: { message: '[REJECTED] a person rejected stage draft: wrong tone' } }, { id: 'publish', status: 'skipped' }],
    });

    const timed = await harness.startYaml('gated', HEADER('gated') + STAGE('draft', '    approval: { timeout: 2s, onTimeout: approve }\n') + STAGE('publish', '    needs: [draft]\n'));
    const outcome = await end(timed);
    expect(outcome.state.status).toBe('completed');
    expect(outcome.state.warnings).toEqual(['stage draft was approved when its approval timed out (2s)']);
  });

  test('a spent budget stops new stages; `approve --budget-usd` raises it, `reject` ends the run with the spend per stage', async () => {
    const yaml = HEADER('pricey', 'budgetUsd: 0.2\n') + STAGE('first') + STAGE('second', '    needs: [first]\n');
    const raised = await harness.startYaml('pricey', yaml);
    const waiting = await waitForWaiting(raised, 'second', 'budget');
    expect(stageOf(waiting, 'first').totals?.costUsd).toBeGreaterThan(0.2);
    // Search attributes follow the run, so `list` and the Web UI can filter on them.
    // A query may run the workflow code past the last completed workflow task (a new event it has not answered yet), so
    // the attributes that task upserts can show a moment after the state does.
    const attributes = await eventually(
      async () => (await raised.describe()).typedSearchAttributes,
      (a) => a.get(RUN_STATUS_ATTRIBUTE) === 'waiting',
      30_000,
      'the waiting status in the search attributes',
    );
    expect([attributes.get(RUN_STATUS_ATTRIBUTE), attributes.get(CURRENT_STAGES_ATTRIBUTE), attributes.get(PIPELINE_NAME_ATTRIBUTE)]).toEqual(['waiting', ['second'], 'pricey']);
    expect(attributes.get(COST_USD_ATTRIBUTE)).toBeGreaterThan(0.2);
    expect(stageOf(waiting, 'second').waitingFor?.commands[0]).toMatch(new RegExp(`^agent-pipeline approve ${raised.workflowId} --budget-usd \\d+$`));
    expect(await rejection(raised.executeUpdate(approveStageUpdate, { args: [{}] }))).toContain('the run is out of budget');
    expect(await rejection(raised.executeUpdate(approveStageUpdate, { args: [{ budgetUsd: 0.1 }] }))).toContain('must be more than what the run has spent');
    await raised.executeUpdate(approveStageUpdate, { args: [{ budgetUsd: 2 }] });
    const done = await end(raised);
    expect(done.state).toMatchObject({ status: 'completed', budgetUsd: 2 });
    const after = (await raised.describe()).typedSearchAttributes;
    // An empty keyword list is stored as no value.
    expect([after.get(RUN_STATUS_ATTRIBUTE), after.get(CURRENT_STAGES_ATTRIBUTE)]).toEqual(['completed', undefined]);

    const refused = await harness.startYaml('pricey', yaml);
    await waitForWaiting(refused, 'second', 'budget');
    await refused.executeUpdate(rejectStageUpdate, { args: [{ reason: 'too expensive' }] });
    const { state, error } = await end(refused);
    expect(failureType(error)).toBe('BUDGET_EXCEEDED');
    expect(state.error?.message).toMatch(/^\[BUDGET_EXCEEDED\] the pipeline budget of \$0\.20 is spent \(\$0\.25\d*: first \$0\.25\d*\); rejected: too expensive/);

    const strict = await harness.startYaml('pricey', HEADER('pricey', 'budgetUsd: 0.2\nonBudgetExceeded: fail\n') + STAGE('first') + STAGE('second', '    needs: [first]\n'));
    const failed = await end(strict);
    expect(failureType(failed.error)).toBe('BUDGET_EXCEEDED');
    expect(stageOf(failed.state, 'first').status).toBe('completed');
  });

  test('at the review-round cap the run asks; more rounds run another review, `reject` fails the run', async () => {
    const yaml = HEADER('picky') + STAGE('write') + STAGE('review', '    needs: [write]\n    review: { of: write, maxRounds: 1 }\n');
    const handle = await harness.startYaml('picky', yaml);
    const capped = await waitForWaiting(handle, 'review', 'review_rounds');
    expect(stageOf(capped, 'review').waitingFor?.message).toContain('asked for rework after 1 of 1 review rounds (1 open findings)');
    await handle.executeUpdate(approveStageUpdate, { args: [{ rounds: 1 }] });
    const again = await waitForWaiting(handle, 'review', 'review_rounds');
    expect(summarize(again)).toMatchObject({ stages: [{ id: 'write', round: 2, status: 'completed' }, { id: 'review', round: 2 }] });
    expect(again.reviews?.review.findings).toEqual([expect.objectContaining({ id: 'F1', state: 'open', lastSeenRound: 2 })]);
    await handle.executeUpdate(rejectStageUpdate, { args: [{ stage: 'review', reason: 'not converging' }] });
    const { error } = await end(handle);
    expect(failureType(error)).toBe('REVIEW_REJECTED');

    const lenient = await harness.startYaml('picky', HEADER('picky') + STAGE('write') + STAGE('review', '    needs: [write]\n    review: { of: write, maxRounds: 1, onMaxRounds: continue }\n'));
    const { state } = await end(lenient);
    expect(state.status).toBe('completed');
    expect(state.warnings?.[0]).toContain('continuing as configured (onMaxRounds: continue)');
  });

  test('a second start with the same id reports the running run instead of starting another', async () => {
    const file = await harness.writePipeline('gated-again', HEADER('gated') + STAGE('draft', '    approval: true\n'));
    const first = await harness.start(file, {}, `same-id-${Date.now()}`);
    const { pipeline, baseDir } = await loadPipelineFile(file);
    const second = await startRun(harness.client, { pipeline, baseDir, pipelineFile: file, inputs: {} }, { taskQueue: harness.taskQueue, id: first.workflowId });
    expect(second.alreadyRunning).toBe(true);
    expect((await second.handle.describe()).runId).toBe((await first.describe()).runId);
    await waitForWaiting(first, 'draft', 'approval');
    await first.executeUpdate(approveStageUpdate, { args: [{}] });
    expect((await end(first)).state.status).toBe('completed');
  });
});
