import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { answerStageUpdate } from '../../src/contracts/messages.js';
import { MAX_UNANSWERED_QUESTIONS } from '../../src/workflows/person-decisions.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { Lane } from '../helpers/lanes.js';
import { runCli } from './cli-helpers.js';
import { expectNoStageLeftRunning, stageOf, waitForWaiting } from './workflow-helpers.js';

/*
 * Issue 10 item 5: a question nobody answers no longer holds the run for ever. `answer: {timeout, onTimeout}` (per
 * stage, or in `defaults`) fails the stage, skips it, or lets the agent go on with a note; `status` shows the deadline.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const QUESTION = 'BLOCKED: Which output format do you want, JSON or YAML?';
const rule = (pipeline: string, stage: string, turns: Rule['turns']): Rule => ({ name: `${pipeline}/${stage}`, match: `Pipeline: ${pipeline} · Stage: ${stage} ·`, turns });
const RULES: Rule[] = [
  rule('unanswered-fail', 'plan', [{ text: QUESTION }, { text: report('never reached') }]),
  rule('unanswered-skip', 'plan', [{ text: QUESTION }]),
  rule('unanswered-skip', 'after', [{ text: report('ran after the skipped stage') }]),
  rule('unanswered-continue', 'plan', [{ text: QUESTION }, { text: report('Assumed YAML.') }]),
  rule('unanswered-status', 'plan', [{ text: QUESTION }, { text: report('answered') }]),
  { ...rule('unanswered-forever', 'plan', [{ text: QUESTION }]), repeatLastTurn: true },
];
const HEADER = (name: string, defaults = ''): string =>
  `name: ${name}\ndefaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500${defaults} }\nstages:\n`;
const STAGE = (id: string, extra = ''): string => `  - id: ${id}\n    prompt: Do ${id}.\n${extra}`;

// Two harnesses, each a lane of tests run one at a time: the agent that keeps asking (ten timeouts in a row) on one,
// the other tests on the other, the lanes at once (issue 32). The timeout counts the wait for a lane's earlier tests.
describe.concurrent('a question nobody answers', { timeout: 300_000 }, () => {
  let harnesses: Harness[] = [];
  const [laneA, laneB] = [0, 1].map((i) => new Lane(() => harnesses[i]));
  beforeAll(async () => {
    harnesses = await Promise.all(['a', 'b'].map((lane) => createHarness(`answer-timeout-${lane}`, { scenario: { rules: RULES } })));
  });
  afterAll(async () => {
    await Promise.all(harnesses.map((harness) => harness.close()));
  });

  async function end(harness: Harness, handle: WorkflowHandle): Promise<{ error?: unknown; state: Awaited<ReturnType<Harness['finish']>> }> {
    const error = await handle.result().then(() => undefined, (err: unknown) => err);
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    return { error, state };
  }

  test('fails the stage and the run when onTimeout is fail (the default), set in the pipeline defaults', () =>
    laneB.run(async (harness) => {
      const handle = await harness.startYaml('unanswered-fail', HEADER('unanswered-fail', ', answer: { timeout: 2s }') + STAGE('plan'));
      const { error, state } = await end(harness, handle);
      expect(error).toBeInstanceOf(WorkflowFailedError);
      const cause = (error as WorkflowFailedError).cause as ApplicationFailure;
      expect(cause.type).toBe('ANSWER_TIMED_OUT');
      expect(cause.message).toContain('nobody answered the question of stage plan within 2s');
      expect(stageOf(state, 'plan')).toMatchObject({ status: 'failed', error: { type: 'ANSWER_TIMED_OUT' } });
    }));

  test('skips the stage, and its dependents still run, when onTimeout is skip', () =>
    laneB.run(async (harness) => {
      const yaml = HEADER('unanswered-skip') + STAGE('plan', '    answer: { timeout: 2s, onTimeout: skip }\n') + STAGE('after', '    needs: [plan]\n');
      const { error, state } = await end(harness, await harness.startYaml('unanswered-skip', yaml));
      expect(error).toBeUndefined();
      expect(state.status).toBe('completed');
      expect(stageOf(state, 'plan').status).toBe('skipped');
      expect(stageOf(state, 'after')).toMatchObject({ status: 'completed', result: { summary: 'ran after the skipped stage' } });
    }));

  test('lets the agent go on in the same conversation with the note when onTimeout is continue', () =>
    laneB.run(async (harness) => {
      const note = 'Nobody is around: pick YAML and say so.';
      const yaml = HEADER('unanswered-continue') + STAGE('plan', `    answer: { timeout: 2s, onTimeout: continue, note: "${note}" }\n`);
      const { error, state } = await end(harness, await harness.startYaml('unanswered-continue', yaml));
      expect(error).toBeUndefined();
      expect(stageOf(state, 'plan')).toMatchObject({ status: 'completed', result: { summary: 'Assumed YAML.' } });
      expect((state.warnings ?? []).some((w) => w.includes('went on without an answer'))).toBe(true);
      const followUp = harness.modelServer.requests().filter((r) => r.rule === 'unanswered-continue/plan').at(-1);
      const messages = (followUp?.body as { messages: { role: string; content: unknown }[] }).messages;
      // The same conversation: the question is in it, and the note is the last user message.
      expect(JSON.stringify(messages)).toContain('Which output format');
      expect(JSON.stringify(messages.at(-1))).toContain(note);
    }));

  test('an agent that keeps asking with onTimeout continue is not re-asked for ever: the stage fails after the bound', () =>
    laneA.run(async (harness) => {
      const yaml = HEADER('unanswered-forever') + STAGE('plan', '    answer: { timeout: 1s, onTimeout: continue }\n');
      const { error, state } = await end(harness, await harness.startYaml('unanswered-forever', yaml));
      expect(error).toBeInstanceOf(WorkflowFailedError);
      const cause = (error as WorkflowFailedError).cause as ApplicationFailure;
      expect(cause.type).toBe('ANSWER_TIMED_OUT');
      expect(cause.message).toContain(`the ${MAX_UNANSWERED_QUESTIONS + 1}th question of this round nobody answered (at most ${MAX_UNANSWERED_QUESTIONS} may go unanswered`);
      expect(stageOf(state, 'plan')).toMatchObject({ status: 'failed', error: { type: 'ANSWER_TIMED_OUT' } });
      // The question was asked once, then once after each of the unanswered timeouts the bound allows.
      expect(harness.modelServer.requests().filter((r) => r.rule === 'unanswered-forever/plan')).toHaveLength(MAX_UNANSWERED_QUESTIONS + 1);
    }));

  test('status shows the deadline and what happens then', () =>
    laneB.run(async (harness) => {
      const yaml = HEADER('unanswered-status') + STAGE('plan', '    answer: { timeout: 1h, onTimeout: skip }\n');
      const handle = await harness.startYaml('unanswered-status', yaml);
      const state = await waitForWaiting(handle, 'plan', 'answer');
      const wait = stageOf(state, 'plan').waitingFor!;
      expect(wait.timeoutAt! - wait.since).toBe(3_600_000);
      expect(wait.onTimeout).toBe('the stage is skipped');
      const status = await runCli(['status', handle.workflowId], harness.env);
      const deadline = `${new Date(wait.timeoutAt!).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
      expect(status.stdout).toContain(`deadline ${deadline}; then the stage is skipped`);
      await handle.executeUpdate(answerStageUpdate, { args: [{ stage: 'plan', text: 'YAML' }] });
      const { state: final } = await end(harness, handle);
      expect(stageOf(final, 'plan').status).toBe('completed');
    }));
});
