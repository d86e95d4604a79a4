import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { PipelineClient } from '../../src/library/pipeline-client.js';
import type { RunJson } from '../../src/cli/json.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import { getStatusQuery } from '../../src/contracts/messages.js';
import { listWaits } from '../../src/cli/run-view.js';
import { CLI_FIXTURES, eventually, parseJson, runCli, runCliCommands } from './cli-helpers.js';
import { waitForState } from './workflow-helpers.js';

const GATES = path.join(CLI_FIXTURES, 'gates.yaml');
// Works until cancelled: a cancel sent by a CLI process on a loaded machine cannot come after the stage's end.
const ENDLESS = path.join(CLI_FIXTURES, 'endless.yaml');
const RETRY = path.join(CLI_FIXTURES, 'retry.yaml');

// The tests share one worker and model server but each drives runs of its own (the scripted replies follow each
// conversation), so they run at once: most of their time is spent waiting for agents and for people's decisions.
describe.concurrent('answer, approve, reject and cancel as a user runs them', () => {
  let harness: Harness;
  let env: NodeJS.ProcessEnv;
  /** For what a test does before the commands it is about: each command costs a Node process. */
  let library: PipelineClient;

  beforeAll(async () => {
    harness = await createHarness('cli-decisions', { scenario: path.join(CLI_FIXTURES, 'scenario.yaml') });
    env = harness.env;
    library = await PipelineClient.connect({ env });
  });
  afterAll(async () => {
    await library?.close();
    await harness?.close();
  });

  const status = async (runId: string): Promise<RunJson> => parseJson<RunJson>(await runCli(['status', runId, '--json'], env));
  /**
   * Waits on the run's own status query (a gRPC call, cheap), then reads `status --json` as a user would. Polling the
   * command itself started a Node process every half second, which on a loaded 2-core machine cost more than the run.
   */
  const until = async (runId: string, ready: (state: RunState) => boolean, accept: (run: RunJson) => boolean, what: string): Promise<RunJson> => {
    await waitForState(harness.client.workflow.getHandle(runId), ready, 90_000);
    return eventually(() => status(runId), accept, 60_000, what);
  };
  const waiting = (stage: string, kind: string) => (state: RunState): boolean => state.stages.some((s) => s.id === stage && s.waitingFor?.kind === kind);
  const waitsFor = (runId: string, stage: string, kind: string): Promise<RunJson> =>
    until(runId, waiting(stage, kind), (run) => run.waiting.some((w) => w.stage === stage && w.kind === kind), `${stage} waiting for ${kind}`);
  /**
   * Only the run's own status query, where the test just waits before its next command: that `status --json` lists
   * each of these waits is checked once, where the test reads it (a command costs a Node process).
   */
  const reaches = async (runId: string, stage: string, kind: string): Promise<void> => {
    await waitForState(harness.client.workflow.getHandle(runId), waiting(stage, kind), 90_000);
  };

  /** Starts the gates pipeline and answers its question through the library, leaving it at the approval gate. */
  async function startAndAnswer(): Promise<string> {
    const run = await library.start(GATES);
    await reaches(run.id, 'ask', 'answer');
    await run.answer('Green, please.', { stage: 'ask' });
    await reaches(run.id, 'ship', 'approval');
    return run.id;
  }

  test('status shows the question with the exact command; answer and approve move the run to completion', async () => {
    // Started through the library: `start` as a user runs it is the other tests' (a command costs a Node process).
    const runId = (await library.start(GATES)).id;
    await reaches(runId, 'ask', 'answer');
    // Back to back in one process (a command costs a Node process): what status shows, and a decision the run does
    // not wait for. The refused decision changes nothing, so the three can be read again until status lists the wait.
    const [asking, human, wrong] = await eventually(
      () => runCliCommands([['status', runId, '--json'], ['status', runId], ['approve', runId, '--stage', 'ask']], env),
      ([json]) => parseJson<RunJson>(json).waiting.some((w) => w.stage === 'ask' && w.kind === 'answer'),
      60_000,
      'ask waiting for answer',
    );
    expect(parseJson<RunJson>(asking).status).toBe('blocked');
    expect(parseJson<RunJson>(asking).waiting[0]).toMatchObject({ stage: 'ask', kind: 'answer', question: expect.stringContaining('blue or green') });
    expect(human.stdout).toContain('⏸ ask waits for answer: Should the button be blue or green?');
    expect(human.stdout).toMatch(new RegExp(`^ {4}→ agent-pipeline answer ${runId} --stage ask `, 'm'));

    // A decision the run does not wait for is refused, and nothing changes.
    expect(wrong.exitCode, wrong.stderr).toBe(2);
    expect(wrong.stderr).toMatch(/^agent-pipeline: \[REQUEST_REJECTED\] .*ask/);
    // Read through the run's own status query: `status --json` was read just before (a command costs a Node process).
    const unchanged = await harness.client.workflow.getHandle(runId).query(getStatusQuery);
    expect(listWaits(unchanged).map((w) => w.kind)).toEqual(['answer']);

    const answered = await runCli(['answer', runId, '--stage', 'ask', 'Green, please.'], env);
    expect(answered.exitCode, answered.stderr).toBe(0);
    expect(answered.stdout.split('\n')[0]).toBe('✔ answered stage ask');
    const gated = await waitsFor(runId, 'ship', 'approval');
    expect(gated.stages.find((s) => s.id === 'ask')?.result?.outputs).toEqual({ colour: 'green' });

    // Back to back in one process: the approval, the watch it ends, and the status after.
    const [approved, watched, final] = await runCliCommands([['approve', runId, '--json'], ['watch', runId], ['status', runId, '--json']], env, 180_000);
    expect(approved.exitCode, approved.stderr).toBe(0);
    expect(parseJson<RunJson>(approved)).toMatchObject({ runId, source: 'update', waiting: [] });
    expect(watched.exitCode, watched.stderr).toBe(0);
    expect(watched.stdout).toMatch(/^✔ ship completed/m);
    expect(parseJson<RunJson>(final).status).toBe('completed');
  });

  test('reject fails the stage with the reason, and watch exits 1', async () => {
    const runId = await startAndAnswer();
    const rejected = await runCli(['reject', runId, '--stage', 'ship', '--reason', 'not this week'], env);
    expect(rejected.exitCode, rejected.stderr).toBe(0);
    // Back to back in one process: a command costs a Node process.
    const [watched, again] = await runCliCommands([['watch', runId, '--json'], ['approve', runId]], env, 180_000);
    expect(watched.exitCode, watched.stderr).toBe(1);
    const run = parseJson<RunJson>(watched);
    expect(run.status).toBe('failed');
    expect(JSON.stringify(run.stages.find((s) => s.id === 'ship'))).toContain('not this week');

    expect(again.exitCode, again.stderr).toBe(2);
    expect(again.stderr).toBe(`agent-pipeline: [RUN_CLOSED] run ${runId} has ended (failed); nothing waits for a decision`);
  });

  test('a failed stage waiting for a person is retried with feedback, or skipped so its dependents still run', async () => {
    const { runId: retried } = parseJson<{ runId: string }>(await runCli(['start', RETRY, '--json'], env));
    const skipped = (await library.start(RETRY)).id;
    const failing = await waitsFor(retried, 'flaky', 'failure');
    expect(failing.waiting[0].message).toContain('the flaky thing broke');
    expect(failing.waiting[0].commands).toContain(`agent-pipeline skip ${retried} --stage flaky`);

    // Each decision and the watch that follows it run back to back in one process: a command costs a Node process.
    // (Not with the status above: a status query that times out on a loaded machine is read again, a decision not.)
    const [retry, afterRetry] = await runCliCommands([['retry', retried, '--stage', 'flaky', '--feedback', 'Use the other approach.'], ['watch', retried, '--json']], env, 180_000);
    expect(retry.exitCode, retry.stderr).toBe(0);
    expect(retry.stdout.split('\n')[0]).toBe('✔ retrying stage flaky');
    expect(afterRetry.exitCode, afterRetry.stderr).toBe(0);
    expect(parseJson<RunJson>(afterRetry).stages.map((s) => [s.id, s.status, s.result?.summary])).toEqual([
      ['flaky', 'completed', 'Worked with the hint.'],
      ['after', 'completed', 'Wrapped up.'],
    ]);

    await reaches(skipped, 'flaky', 'failure');
    const [skip, afterSkip] = await runCliCommands([['skip', skipped, '--stage', 'flaky'], ['watch', skipped, '--json']], env, 180_000);
    expect(skip.exitCode, skip.stderr).toBe(0);
    expect(afterSkip.exitCode, afterSkip.stderr).toBe(0);
    expect(parseJson<RunJson>(afterSkip).stages.map((s) => [s.id, s.status])).toEqual([['flaky', 'skipped'], ['after', 'completed']]);
  });

  test('cancel stops a running stage; a second start with the same id reports the run instead of starting another', async () => {
    const runId = `cli-endless-${Math.random().toString(36).slice(2, 8)}`;
    const first = parseJson(await runCli(['start', ENDLESS, '--id', runId, '--json'], env));
    expect(first).toEqual({ runId, alreadyRunning: false, webUi: expect.stringContaining(runId), bundle: expect.objectContaining({ files: 1 }) });
    await waitForState(harness.client.workflow.getHandle(runId), (state) => state.stages[0]?.status === 'running', 90_000);
    // The stage works until cancelled, so the commands run back to back in one process (a command costs a Node process):
    // a second start and status while it runs, read again if the status query timed out on a loaded machine; then
    // cancel, watch, status, and a second cancel.
    const [again, running] = await eventually(
      () => runCliCommands([['start', ENDLESS, '--id', runId, '--json'], ['status', runId, '--json']], env),
      ([, json]) => parseJson<RunJson>(json).stages[0].status === 'running',
      60_000,
      'crawl running',
    );
    expect(parseJson(again)).toMatchObject({ runId, alreadyRunning: true });
    expect(parseJson<RunJson>(running).stages[0].status).toBe('running');
    const [cancelled, watched, after, twice] = await runCliCommands([['cancel', runId], ['watch', runId], ['status', runId, '--json'], ['cancel', runId]], env, 180_000);

    expect(cancelled.exitCode, cancelled.stderr).toBe(0);
    expect(cancelled.stdout).toContain(`Cancellation requested for ${runId}`);
    expect(watched.exitCode, watched.stderr).toBe(1);
    const run = parseJson<RunJson>(after);
    expect(run).toMatchObject({ status: 'cancelled', executionStatus: 'CANCELLED' });
    expect(run.stages[0].status).toBe('cancelled');
    expect(twice.exitCode, twice.stderr).toBe(2);
    expect(twice.stderr).toContain('has already ended (cancelled)');
  });
});
