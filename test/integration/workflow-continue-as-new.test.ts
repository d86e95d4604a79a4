import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { listRuns } from '../../src/library/list-runs.js';
import { RunHandle } from '../../src/library/run-handle.js';
import { rebuildRunState } from '../../src/library/run-history.js';
import { readRun } from '../../src/library/run-reader.js';
import type { PipelineRunInput } from '../../src/contracts/messages.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { Lane } from '../helpers/lanes.js';
import { expectNoStageLeftRunning, stageOf, summarize, waitForState, waitForWaiting } from './workflow-helpers.js';

/*
 * Long runs continue as new: with the lowest `continueAsNew.afterEvents` (100), a 36-stage run and a 16-round
 * review loop each hand over to fresh executions of themselves several times, carrying their whole state (results,
 * costs, ledgers, sessions), and clients still see one run. The anthropic-api backend against the scripted model server keeps it fast.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];

const report = (summary: string, outputs: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): string =>
  `Done.\n\`\`\`json\n${JSON.stringify({ success: true, summary, outputs, ...extra })}\n\`\`\``;

const HEADER = (name: string, afterEvents: number): string =>
  `name: ${name}\ncontinueAsNew: { afterEvents: ${afterEvents} }\n` +
  'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500, heartbeatTimeout: 10s }\nstages:\n';

// About 10 events a stage and 20 a review round: 36 stages run in 4 executions of 100 events, 16 rounds in 3 (2 by
// the cap at round 8); each check on the chain's length keeps a margin of 60 events or more.
const LINEAR_STAGES = 36;
/** The stage of a middle execution whose result the last stage reads, beside the first stage's. */
const MIDDLE_STAGE = LINEAR_STAGES / 2;
const REVIEW_ROUNDS = 16;
/** Fast steps of the deadline test: the first hand-over (a dozen stages) comes among them; the steps after are slow. */
const QUICK_STEPS = 16;

/** Every execution of a run, oldest first: walks back from the latest through each start event's `continuedExecutionRunId`. */
async function executionChain(client: Client, workflowId: string): Promise<{ runId: string; input: PipelineRunInput }[]> {
  const chain: { runId: string; input: PipelineRunInput }[] = [];
  let runId: string | undefined = (await client.workflow.getHandle(workflowId).describe()).runId;
  while (runId) {
    const current: string = runId;
    const page = await client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId, runId: current }, maximumPageSize: 1 });
    const started = page.history?.events?.[0]?.workflowExecutionStartedEventAttributes;
    const input = defaultPayloadConverter.fromPayload<PipelineRunInput>(started!.input!.payloads![0]);
    chain.unshift({ runId: current, input });
    const previous: string | null | undefined = started?.continuedExecutionRunId;
    runId = previous || undefined;
  }
  return chain;
}

// One harness: the deadline test (a 40 s wait; its scripted steps take their time) and the 36-stage run beside it,
// and beside them the review loop and then the approval test, in a lane (they read the model server's requests).
describe.concurrent('continue-as-new', () => {
  let harness: Harness;
  const peopleLane = new Lane(() => harness);
  const rules: Rule[] = [
    ...Array.from({ length: LINEAR_STAGES }, (_, i): Rule => ({
      match: `Pipeline: long-linear · Stage: s${i + 1} ·`,
      // The first stage also reports a field of its own beside the contract's (`{{stages.s1.report.checked}}`).
      turns: [{ text: report(`stage ${i + 1} done`, { value: `v${i + 1}` }, i === 0 ? { checked: 'yes' } : {}) }],
    })),
    { match: 'Pipeline: long-review · Stage: work ·', turns: [{ text: report('reworked the draft') }], repeatLastTurn: true },
    {
      match: 'Pipeline: long-review · Stage: review ·',
      turns: [
        ...Array.from({ length: REVIEW_ROUNDS - 1 }, (_, i) => ({ text: report(`round ${i + 1}: not yet`, {}, { verdict: 'rework', feedback: ['F1: the title is still wrong'] }) })),
        { text: report('all good now', {}, { verdict: 'approve', feedback: [] }) },
      ],
    },
    { match: 'Pipeline: handover-humans · Stage: ask ·', turns: [{ text: 'BLOCKED: Which colour?' }, { text: report('painted it', { colour: 'green' }) }] },
    { match: 'Pipeline: handover-humans ·', turns: [{ text: report('done') }], repeatLastTurn: true },
    // The deadline test. Quick steps first: the first hand-over (a dozen stages) comes within seconds even on a loaded
    // machine; then slow ones, so that few stages run until the deadline, and 100 of them outlast it on a quiet machine.
    // The first step is slow, so the hand-over comes well after the start on a quiet machine too (the test tells the
    // two start times apart).
    { match: 'Pipeline: long-timeout · Stage: s1 ·', turns: [{ text: report('step'), delayMs: 2_500 }] },
    { match: { regex: `Pipeline: long-timeout · Stage: s(${Array.from({ length: QUICK_STEPS - 1 }, (_, i) => i + 2).join('|')}) ·` }, turns: [{ text: report('step'), delayMs: 150 }], repeatLastTurn: true },
    { match: 'Pipeline: long-timeout ·', turns: [{ text: report('step'), delayMs: 1_000 }], repeatLastTurn: true },
  ];

  beforeAll(async () => {
    harness = await createHarness('can', { scenario: { rules } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  test('the deadline counts from the first execution: a hand-over does not restart it', { timeout: 300_000 }, async () => {
    // Long enough for the first hand-over (100 events, a dozen stages) on a loaded machine (20 s was not, once: no
    // hand-over before the deadline), far shorter than 100 stages (the steps after the 16th take 1 s each: 84 s more).
    const timeoutMs = 40_000;
    const stages = Array.from({ length: 100 }, (_, i) => `  - id: s${i + 1}\n    prompt: Do s${i + 1}.\n${i > 0 ? `    needs: [s${i}]\n` : ''}`);
    const handle = await harness.startYaml('long-timeout', HEADER('long-timeout', 100).replace('defaults:', `timeout: ${timeoutMs / 1000}s\ndefaults:`) + stages.join(''));
    const final = await harness.finish(handle);
    expect(final.status).toBe('timed_out');
    expect(final.error?.type).toBe('PIPELINE_TIMEOUT');
    const chain = await executionChain(harness.client, handle.workflowId);
    expect(chain.length).toBeGreaterThanOrEqual(2);
    // Restarted at the hand-over, the timeout would end the run `timeoutMs` after the second execution started, not after the first.
    const handedOverAt = (await harness.client.workflow.getHandle(handle.workflowId, chain[1].runId).describe()).startTime.getTime();
    expect(handedOverAt - final.startedAt).toBeGreaterThan(1_000);
    expect(final.finishedAt! - final.startedAt).toBeGreaterThanOrEqual(timeoutMs);
    expect(final.finishedAt!).toBeLessThan(handedOverAt + timeoutMs);
  });

  test('a 36-stage run continues as new several times and ends with every result, total and the cost', { timeout: 600_000 }, async () => {
    const stages = Array.from({ length: LINEAR_STAGES }, (_, i) => {
      const id = `s${i + 1}`;
      // The last stage reads a result of the first execution: results are carried, not only statuses.
      // Its answer and report fields are carried too.
      const prompt = i === LINEAR_STAGES - 1 ? `Do ${id} after {{stages.s1.outputs.value}} and {{stages.s${MIDDLE_STAGE}.outputs.value}} ({{stages.s1.answer}} {{stages.s1.report.checked}}).` : `Do ${id}.`;
      return `  - id: ${id}\n    prompt: "${prompt}"\n${i > 0 ? `    needs: [s${i}]\n` : ''}`;
    });
    const handle = await harness.startYaml('long-linear', HEADER('long-linear', 100) + stages.join(''));
    const final = await new RunHandle(harness.client, handle.workflowId).result();

    expectNoStageLeftRunning(final);
    expect(final.status).toBe('completed');
    expect(final.stages.map((s) => [s.id, s.status, s.result?.outputs.value])).toEqual(
      Array.from({ length: LINEAR_STAGES }, (_, i) => [`s${i + 1}`, 'completed', `v${i + 1}`]),
    );
    // Every stage ran once, and the run's cost is every stage's cost, whichever execution ran it.
    for (const stage of final.stages) expect(stage.totals).toMatchObject({ attempts: 1, inputTokens: 100, costUsd: expect.any(Number) });
    const stageCosts = final.stages.map((s) => s.totals!.costUsd);
    expect(Math.min(...stageCosts)).toBeGreaterThan(0);
    expect(final.costUsd).toBeCloseTo(stageCosts.reduce((a, b) => a + b, 0), 10);

    const chain = await executionChain(harness.client, handle.workflowId);
    expect(chain.length).toBeGreaterThanOrEqual(3);
    // The first execution was started by the client; each later one by the run, with the bundle and the state it carried.
    expect(chain[0].input.carryOver).toBeUndefined();
    for (const [i, { input }] of chain.slice(1).entries()) {
      expect(input.carryOver).toMatchObject({ version: 1, executions: i + 1, state: { runId: handle.workflowId, startedAt: final.startedAt } });
      expect(input.bundle?.hash).toBe(chain[0].input.bundle?.hash);
    }
    const lastPrompt = harness.modelServer.requests().find((r) => r.path === '/v1/messages' && JSON.stringify(r.body).includes(`Pipeline: long-linear · Stage: s${LINEAR_STAGES} ·`));
    expect(JSON.stringify(lastPrompt?.body)).toContain(`Do s${LINEAR_STAGES} after v1 and v${MIDDLE_STAGE} (Done. yes).`);

    // Clients see one run: status reads all its stages, list shows one entry with the run's first start time.
    const snapshot = await readRun(harness.client, handle.workflowId);
    expect(snapshot.state.stages.filter((s) => s.status === 'completed')).toHaveLength(LINEAR_STAGES);
    expect(snapshot.bundle?.hash).toBe(chain[0].input.bundle?.hash);
    const rebuilt = rebuildRunState(await handle.fetchHistory(), await handle.describe());
    expect(rebuilt.stages.map((s) => s.status)).toEqual(Array(LINEAR_STAGES).fill('completed'));
    expect(rebuilt.costUsd).toBeCloseTo(final.costUsd, 10);
    expect(rebuilt.startedAt).toBe(final.startedAt);
    const listed = await waitForList(harness.client, 'long-linear');
    expect(listed).toEqual([expect.objectContaining({ runId: handle.workflowId, pipeline: 'long-linear', status: 'completed', startedAt: final.startedAt })]);
  });

  test('a review loop of 16 rounds continues as new and keeps its ledger, sessions, granted rounds and totals', { timeout: 600_000 }, () =>
    peopleLane.run(async (harness) => {
      // The file grants half the rounds; a person grants the other half at the cap, so the rounds granted cross the
      // hand-overs too (lost, the loop would stop at the cap again).
      const yaml =
        HEADER('long-review', 100) +
        '  - id: work\n    prompt: Write the draft.\n' +
        `  - id: review\n    prompt: Review the draft.\n    needs: [work]\n    review: { of: work, maxRounds: ${REVIEW_ROUNDS / 2} }\n`;
      const handle = await harness.startYaml('long-review', yaml);
      const run = new RunHandle(harness.client, handle.workflowId);
      await waitForWaiting(handle, 'review', 'review_rounds', 300_000);
      expect((await executionChain(harness.client, handle.workflowId)).length).toBeGreaterThanOrEqual(2);
      await run.approve({ stage: 'review', rounds: REVIEW_ROUNDS / 2 });
      // Ends, or stops at a cap again (as it would if the rounds granted or the sessions were lost on the way).
      const ended = await waitForState(handle, (s) => s.status === 'completed' || s.status === 'failed' || stageOf(s, 'review').waitingFor !== undefined, 300_000);
      expect(summarize(ended)).toMatchObject({ status: 'completed' });
      const final = await run.result();

      expect(summarize(final)).toMatchObject({
        status: 'completed',
        stages: [
          { id: 'work', status: 'completed', round: REVIEW_ROUNDS },
          { id: 'review', status: 'completed', round: REVIEW_ROUNDS },
        ],
      });
      // One finding, open for 15 rounds, fixed in the last: the ledger crossed every hand-over.
      expect(final.reviews?.review.findings).toEqual([
        { id: 'F1', text: 'the title is still wrong', state: 'fixed', raisedInRound: 1, lastSeenRound: REVIEW_ROUNDS - 1, fixedInRound: REVIEW_ROUNDS },
      ]);
      expect(stageOf(final, 'work').totals?.attempts).toBe(REVIEW_ROUNDS);
      expect(stageOf(final, 'review').totals?.attempts).toBe(REVIEW_ROUNDS);
      expect(final.costUsd).toBeCloseTo(stageOf(final, 'work').totals!.costUsd + stageOf(final, 'review').totals!.costUsd, 10);
      // Sessions were carried: the reviewer's conversation went on to its 16th turn instead of starting over.
      const reviewTurns = harness.modelServer.requests().filter((r) => r.path === '/v1/messages' && JSON.stringify(r.body).includes('Pipeline: long-review · Stage: review ·')).map((r) => r.turn);
      expect(reviewTurns).toEqual(Array.from({ length: REVIEW_ROUNDS }, (_, i) => i));
      // The rework brief of round 16 still lists the finding raised in round 1.
      const lastRework = harness.modelServer.requests().filter((r) => r.path === '/v1/messages' && JSON.stringify(r.body).includes('Pipeline: long-review · Stage: work ·')).at(-1);
      expect(JSON.stringify(lastRework?.body)).toContain(`Rework (round ${REVIEW_ROUNDS})`);
      expect(JSON.stringify(lastRework?.body)).toContain('F1: the title is still wrong');
      expect((await executionChain(harness.client, handle.workflowId)).length).toBeGreaterThanOrEqual(3);
    }));

  test('an approval given while the run waits to hand over lands, and an answer reaches the continued run', { timeout: 600_000 }, () =>
    peopleLane.run(async (harness) => {
      // `gate` waits for a person while the chain beside it pushes the history past the limit: the run starts nothing
      // new until the gate is decided, then hands over; `ask` then asks its question in a later execution.
      const chain = Array.from({ length: 20 }, (_, i) => `  - id: c${i + 1}\n    prompt: Do c${i + 1}.\n${i > 0 ? `    needs: [c${i}]\n` : ''}`);
      const yaml =
        HEADER('handover-humans', 100) +
        '  - id: gate\n    approval: true\n' +
        chain.join('') +
        '  - id: after\n    prompt: Do after.\n    needs: [gate, c20]\n' +
        '  - id: ask\n    prompt: Do ask.\n    needs: [after]\n';
      const handle = await harness.startYaml('handover-humans', yaml);
      const run = new RunHandle(harness.client, handle.workflowId);
      await waitForWaiting(handle, 'gate', 'approval');
      // Wait until the chain stopped short of its end because a hand-over is due (nothing runs but the gate's wait).
      const held = await waitForState(handle, (s) => s.stages.filter((x) => x.status === 'running').length === 0 && stageOf(s, 'c20').status === 'pending', 120_000);
      expect(stageOf(held, 'gate').status).toBe('waiting');
      expect((await executionChain(harness.client, handle.workflowId)).length).toBe(1);

      const approved = await run.approve({ stage: 'gate', comment: 'go' });
      expect(stageOf(approved, 'gate').status).toBe('completed');

      await waitForWaiting(handle, 'ask', 'answer', 120_000);
      const executionsAtQuestion = (await executionChain(harness.client, handle.workflowId)).length;
      expect(executionsAtQuestion).toBeGreaterThanOrEqual(2);
      await run.answer('Green.', { stage: 'ask' });
      const final = await run.result();
      expectNoStageLeftRunning(final);
      expect(final.status).toBe('completed');
      expect(stageOf(final, 'ask').result?.outputs).toEqual({ colour: 'green' });
      expect(final.stages.map((s) => s.status)).toEqual(Array(23).fill('completed'));
    }));
});

/** `list` once the visibility store caught up with the run's end. */
async function waitForList(client: Client, pipeline: string): ReturnType<typeof listRuns> {
  for (let i = 0; ; i++) {
    const runs = await listRuns(client, { pipeline });
    if ((runs.length === 1 && runs[0].status === 'completed') || i > 40) return runs;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
