import { stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import type { RunJson } from '../../src/cli/json.js';
import type { RunListItem } from '../../src/cli/commands/list.js';
import { PipelineClient } from '../../src/library/pipeline-client.js';
import { CLI_FIXTURES, eventually, parseJson, runCli, runCliCommands, type CliResult } from './cli-helpers.js';

const BASIC = path.join(CLI_FIXTURES, 'basic.yaml');
const FAILING = path.join(CLI_FIXTURES, 'failing.yaml');

describe('start, status, list and logs as a user runs them', () => {
  let harness: Harness;
  let env: NodeJS.ProcessEnv;
  let basicRun: string;
  let failedRun: string;
  /** For what a test does before the commands it is about, and for its waits: each command costs a Node process. */
  let library: PipelineClient;
  /**
   * The finished basic run read by status, logs --raw and logs of an unknown stage: run together in one process, the
   * first time a test asks (a command costs a Node process). Each test still makes a command of its own as a user runs it.
   */
  let finishedReads: Promise<CliResult[]> | undefined;
  const readFinished = (): Promise<CliResult[]> =>
    (finishedReads ??= runCliCommands([['status', basicRun], ['logs', basicRun, '--stage', 'write', '--raw'], ['logs', basicRun, '--stage', 'deploy']], env));

  beforeAll(async () => {
    harness = await createHarness('cli-runs', { scenario: path.join(CLI_FIXTURES, 'scenario.yaml') });
    env = harness.env;
    library = await PipelineClient.connect({ env });
  });
  afterAll(async () => {
    await library?.close();
    await harness?.close();
  });

  test('start --wait prints each stage as it ends, then the artifacts and the Web UI link, and exits 0', async () => {
    const result = await runCli(['start', BASIC, '--input', 'topic=tea', '--wait'], env);
    expect(result.stderr).toBe('');
    expect(result.exitCode, result.stderr).toBe(0);
    basicRun = /^Started: (\S+)$/m.exec(result.stdout)![1];
    expect(basicRun).toMatch(/^cli-basic-/);
    const lines = result.stdout.split('\n');
    const write = lines.findIndex((l) => /^✔ write completed · \S+ · \$\d+\.\d{4} · Wrote notes\.md\.$/.test(l));
    expect(write, result.stdout).toBeGreaterThan(0);
    expect(write).toBeLessThan(lines.findIndex((l) => /^✔ check completed · /.test(l)));
    expect(result.stdout).toMatch(new RegExp(`^Run ${basicRun} completed · `, 'm'));
    expect(result.stdout).toMatch(/^ {2}write +\/.+\/notes\.md +12 bytes$/m);
    // The host of TEMPORAL_ADDRESS (127.0.0.1 here), as the dev server prints its UI.
    expect(result.stdout).toMatch(new RegExp(`^Web UI: http://127\\.0\\.0\\.1:\\d+/namespaces/default/workflows/${basicRun}$`, 'm'));
  });

  test('status --json of a finished run has the documented shape', async () => {
    const run = parseJson<RunJson>(await runCli(['status', basicRun, '--json'], env));
    expect(run).toMatchObject({
      runId: basicRun,
      pipeline: 'cli-basic',
      status: 'completed',
      inputs: { topic: 'tea' },
      waiting: [],
      executionStatus: 'COMPLETED',
      workerPolling: true,
      live: {},
    });
    // The worker answers the status query; on a very busy machine the final result stands in for it.
    expect(['query', 'result']).toContain(run.source);
    expect(run.stages.map((s) => [s.id, s.status, s.attempt])).toEqual([['write', 'completed', 1], ['check', 'completed', 1]]);
    expect(run.stages[0].result?.artifacts.map((a) => a.path)).toEqual(['notes.md']);
    expect(run.webUi).toContain(basicRun);
    expect(path.dirname(run.workspace!)).toBe(harness.workspacesRoot);
    expect((await stat(path.join(run.workspace!, 'notes.md'))).isFile()).toBe(true);

    const [human] = await readFinished();
    expect(human.exitCode, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^ {2}✔ write +completed +attempt 1 +\S+ +\$\d+\.\d{4} +Wrote notes\.md\.$/m);
    expect(human.stdout).toContain(`Workspace: ${run.workspace}`);
  });

  test('logs prints the agent transcript: text, tool calls with their input, shortened results, cost per turn', async () => {
    const result = await runCli(['logs', basicRun, '--stage', 'write'], env);
    expect(result.exitCode, result.stderr).toBe(0);
    const out = result.stdout;
    expect(out).toMatch(new RegExp(`^══ ${basicRun} · stage write · round 1 · attempt 1 · .+attempt-1\\.jsonl$`, 'm'));
    expect(out).toMatch(/^\[turn 1 · 1200 input tokens · input \$0\.0024\]$/m);
    expect(out).toContain('  Writing the note.\n  → Edit notes.md\n  ← ok: ');
    expect(out).toMatch(/^── done · 2 turns · \$\d+\.\d{4} · \S+$/m);

    const [, raw, unknown] = await readFinished();
    expect(raw.stdout.split('\n').filter((l) => l.startsWith('{')).every((l) => JSON.parse(l))).toBe(true);

    expect(unknown.exitCode, unknown.stderr).toBe(2);
    expect(unknown.stderr).toBe(`agent-pipeline: run ${basicRun} has no stage "deploy"; its stages: write, check`);
  });

  test('logs --follow waits for the stage to start, prints its transcript as it grows, and stops when the stage ends', async () => {
    // Started through the library: `start` has tests of its own, and a command costs a Node process.
    const runId = (await library.start(BASIC)).id;
    const followed = await runCli(['logs', runId, '--stage', 'check', '--follow'], env);
    expect(followed.exitCode, followed.stderr).toBe(0);
    expect(followed.stdout).toMatch(new RegExp(`^══ ${runId} · stage check · round 1 · attempt 1 · `, 'm'));
    expect(followed.stdout).toMatch(/^── done · 1 turn · /m);
  });

  test('a run whose stage fails ends start --wait with exit 1 and says why', async () => {
    const result = await runCli(['start', FAILING, '--wait', '--json'], env);
    expect(result.exitCode, result.stderr).toBe(1);
    const run = parseJson<RunJson>(result);
    failedRun = run.runId;
    expect(run).toMatchObject({ status: 'failed', executionStatus: 'FAILED' });
    expect(run.stages[0]).toMatchObject({ id: 'broken', status: 'failed' });
    expect(JSON.stringify(run.stages[0].error ?? run.error)).toContain('the task is impossible');
  });

  test('list filters runs by pipeline, status and start time', async () => {
    // Visibility is eventually consistent: a closed run shows its final status a moment later. Waited for through the
    // library in this process (polling the command started a Node process each time), then listed by the commands.
    const hour = 3_600_000;
    await eventually(() => library.list({ pipeline: 'cli-basic', status: 'completed' }), (runs) => runs.some((r) => r.runId === basicRun), 30_000, 'the basic run listed');
    await eventually(() => library.list({ pipeline: 'cli-failing', status: 'failed', sinceMs: hour }), (runs) => runs.some((r) => r.runId === failedRun), 30_000, 'the failed run listed');
    const json = (result: CliResult): RunListItem[] => parseJson<{ runs: RunListItem[] }>(result).runs;
    // Back to back in one process; the human listing below runs as a user runs it.
    const [basicJson, failedJson, runningJson, bad] = await runCliCommands(
      [
        ['list', '--pipeline', 'cli-basic', '--status', 'completed', '--json'],
        // Named by pipeline too: the dev server is shared by every test file, and another file's encrypted runs cannot
        // be decoded without their key.
        ['list', '--pipeline', 'cli-failing', '--status', 'failed', '--since', '1h', '--json'],
        ['list', '--pipeline', 'cli-basic', '--status', 'running', '--json'],
        ['list', '--status', 'sleeping'],
      ],
      env,
    );
    const basic = json(basicJson);
    expect(basic.map((r) => r.runId)).toContain(basicRun);
    expect(basic.every((r) => r.pipeline === 'cli-basic' && r.status === 'completed')).toBe(true);
    expect(basic.find((r) => r.runId === basicRun)).toMatchObject({ costUsd: expect.any(Number), currentStages: [], closedAt: expect.any(Number) });

    const failed = json(failedJson);
    expect(failed.map((r) => r.runId)).toContain(failedRun);
    expect(failed.map((r) => r.runId)).not.toContain(basicRun);
    expect(json(runningJson)).toEqual([]);

    const human = await runCli(['list', '--pipeline', 'cli-basic'], env);
    expect(human.stdout.split('\n')[0]).toMatch(/^RUN +PIPELINE +STATUS +STARTED +DURATION +COST +RUNNING STAGES +FORKED FROM$/);
    expect(human.stdout).toMatch(new RegExp(`^${basicRun} +cli-basic +completed `, 'm'));

    expect(bad.exitCode, bad.stderr).toBe(2);
    expect(bad.stderr).toContain("option '--status <status>' argument 'sleeping' is invalid. expected one of running, completed, failed, cancelled, terminated, timed_out, waiting, blocked");
  });

  test('status works with no worker polling: the state comes from the history and says so', async () => {
    const lonely = { ...env, AGENT_PIPELINE_TASK_QUEUE: `${harness.taskQueue}-nobody` };
    // Named here, so that the start runs in one process with the commands after it (a command costs a Node process;
    // `start` as a user runs it, with the id it makes, is the first test's).
    const runId = `cli-lonely-${Math.random().toString(36).slice(2, 8)}`;
    try {
      // Back to back in one process; nothing polls the queue, so nothing changes.
      const [started, json, human, answer] = await runCliCommands(
        [['start', BASIC, '--id', runId, '--json'], ['status', runId, '--json'], ['status', runId], ['answer', runId, 'hello']],
        lonely,
      );
      expect(parseJson(started)).toMatchObject({ runId, alreadyRunning: false });
      const run = parseJson<RunJson>(json);
      expect(run).toMatchObject({ status: 'running', source: 'history', workerPolling: false, executionStatus: 'RUNNING', inputs: { topic: 'greetings' } });
      expect(run.stages.map((s) => s.status)).toEqual(['pending', 'pending']);
      expect(human.stdout).toContain(`! no worker is polling task queue "${lonely.AGENT_PIPELINE_TASK_QUEUE}"`);
      expect(answer.exitCode, answer.stderr).toBe(3);
      expect(answer.stderr).toContain('[NO_WORKER] no worker polls task queue');
      // A cancel with no worker is kept for later: status still reads "running" (Temporal's word), and says why.
      const [cancel, afterCancel] = await runCliCommands([['cancel', runId], ['status', runId]], lonely);
      expect(cancel.exitCode, cancel.stderr).toBe(0);
      expect(afterCancel.stdout).toContain(`! no worker is polling task queue "${lonely.AGENT_PIPELINE_TASK_QUEUE}": the run is cancelled, and stops, once one starts`);
    } finally {
      await harness.client.workflow.getHandle(runId).terminate('test cleanup').catch(() => undefined);
    }
  });
});
