import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { inject } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import {
  InvalidRequestError,
  PipelineClient,
  PipelineInvalidError,
  RunFailedError,
  RunNotFoundError,
  TemporalUnavailableError,
  type RunEvent,
} from '../../src/library/index.js';
import { CLI_FIXTURES, eventually } from './cli-helpers.js';

/* The client library against the dev server, a worker, the real claude binary and the scripted model server. */

describe('PipelineClient', () => {
  let harness: Harness;
  let client: PipelineClient;

  beforeAll(async () => {
    harness = await createHarness('library', { scenario: path.join(CLI_FIXTURES, 'scenario.yaml') });
    client = await PipelineClient.connect({ env: harness.env });
  });
  afterAll(async () => {
    await client?.close();
    await harness?.close();
  });

  test('answers and approves a run through its events, and result() resolves with the completed state', async () => {
    const run = await client.start(path.join(CLI_FIXTURES, 'gates.yaml'));
    const seen: string[] = [];
    for await (const event of run.events({ intervalMs: 300 })) {
      seen.push(`${event.type}${'stage' in event ? ` ${event.stage}` : ''}`);
      if (event.type === 'stage_waiting' && event.waitingFor.kind === 'answer') await run.answer('blue', { stage: event.stage });
      if (event.type === 'stage_waiting' && event.waitingFor.kind === 'approval') await run.approve({ stage: event.stage, comment: 'ok' });
    }
    expect(seen).toContain('stage_waiting ask');
    expect(seen).toContain('stage_waiting ship');
    expect(seen.at(-1)).toBe('run_ended');
    const state = await run.result();
    expect(state.stages.map((s) => [s.id, s.status])).toEqual([['ask', 'completed'], ['ship', 'completed']]);
  });

  test('events() of a run that already ended tells its stages and the end; result() rejects with RunFailedError', async () => {
    const started = await client.start(path.join(CLI_FIXTURES, 'failing.yaml'));
    const err = await started.result().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RunFailedError);
    expect(err).toMatchObject({ code: 'RUN_FAILED', type: 'failed', state: { status: 'failed', stages: [{ id: 'broken', status: 'failed' }] } });

    const events: RunEvent[] = [];
    for await (const event of client.getRun(started.id).events()) events.push(event);
    expect(events.map((e) => e.type)).toEqual(['stage_failed', 'run_ended']);
    expect(events[1]).toMatchObject({ type: 'run_ended', status: 'failed' });
    await expect(client.getRun(started.id).cancel()).rejects.toMatchObject({ code: 'RUN_CLOSED' });
    await expect(client.getRun(started.id).answer('late')).rejects.toBeInstanceOf(InvalidRequestError);
  });

  test('start with the same id returns the running run; list finds runs by pipeline and status', async () => {
    const id = `library-${Math.random().toString(36).slice(2, 8)}`;
    const first = await client.start(path.join(CLI_FIXTURES, 'gates.yaml'), { id });
    const again = await client.start(path.join(CLI_FIXTURES, 'gates.yaml'), { id });
    expect([first.alreadyRunning, again.alreadyRunning, again.id]).toEqual([false, true, id]);
    const waiting = await eventually(() => client.list({ pipeline: 'cli-gates', status: 'waiting' }), (runs) => runs.some((r) => r.runId === id), 60_000, 'the run listed as waiting');
    // The run waits for an answer to its agent's question: `blocked`, one kind of waiting.
    expect(waiting.find((r) => r.runId === id)).toMatchObject({ pipeline: 'cli-gates', status: 'blocked' });
    await first.cancel();
    await expect(first.result()).rejects.toMatchObject({ code: 'RUN_FAILED', type: 'cancelled' });
  });

  test('idConflictPolicy names what starting a running id does: FAIL refuses, TERMINATE_EXISTING replaces (issue 34)', async () => {
    const id = `library-policy-${Math.random().toString(36).slice(2, 8)}`;
    await client.start(path.join(CLI_FIXTURES, 'gates.yaml'), { id });
    const { runId: firstExecution } = await harness.client.workflow.getHandle(id).describe();
    await expect(client.start(path.join(CLI_FIXTURES, 'gates.yaml'), { id, idConflictPolicy: 'FAIL' })).rejects.toMatchObject({ code: 'RUN_EXISTS' });
    const replaced = await client.start(path.join(CLI_FIXTURES, 'gates.yaml'), { id, idConflictPolicy: 'TERMINATE_EXISTING' });
    expect(replaced.alreadyRunning).toBe(false);
    expect((await harness.client.workflow.getHandle(id, firstExecution).describe()).status.name).toBe('TERMINATED');
    expect((await harness.client.workflow.getHandle(id).describe()).status.name).toBe('RUNNING');
    await replaced.cancel();
  });

  test('listAll() pages through every matching run, past what one page holds (issue 34)', async () => {
    const tag = `paging-${Math.random().toString(36).slice(2, 8)}`;
    const runs = [await client.start(path.join(CLI_FIXTURES, 'gates.yaml'), { id: `${tag}-1` }), await client.start(path.join(CLI_FIXTURES, 'gates.yaml'), { id: `${tag}-2` })];
    const ids = async (): Promise<string[]> => {
      const seen: string[] = [];
      for await (const run of client.listAll({ pipeline: 'cli-gates', pageSize: 1 })) if (run.runId.startsWith(tag)) seen.push(run.runId);
      return seen;
    };
    const seen = await eventually(ids, (found) => found.length === 2, 60_000, 'both runs listed');
    expect(seen).toEqual([`${tag}-2`, `${tag}-1`]);
    await expect(client.listAll({ pageSize: 0 }).next()).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
    for (const run of runs) await run.cancel();
  });

  test('cancel() with no worker on the run\'s task queue is recorded and says so; a decision says NO_WORKER at once', async () => {
    const taskQueue = `nobody-${Math.random().toString(36).slice(2, 8)}`;
    const lonely = await PipelineClient.connect({ env: { ...harness.env, AGENT_PIPELINE_TASK_QUEUE: taskQueue } });
    try {
      const run = await lonely.start(path.join(CLI_FIXTURES, 'gates.yaml'));
      const started = Date.now();
      await expect(run.approve()).rejects.toMatchObject({ code: 'NO_WORKER', message: expect.stringContaining('no worker polls') });
      expect(Date.now() - started).toBeLessThan(5_000);
      await expect(run.cancel()).resolves.toEqual({ workerPolling: false, taskQueue });
      const history = await harness.client.workflow.getHandle(run.id).fetchHistory();
      expect(history.events?.some((e) => e.workflowExecutionCancelRequestedEventAttributes)).toBe(true);
      await harness.client.workflow.getHandle(run.id).terminate('test cleanup');
    } finally {
      await lonely.close();
    }
  });

  test('a decision sent while the run closes says RUN_CLOSED, never RUN_NOT_FOUND', async () => {
    for (let i = 0; i < 5; i++) {
      const run = await client.start(path.join(CLI_FIXTURES, 'gates.yaml'));
      await eventually(() => run.status(), (report) => report.state.stages.some((s) => s.waitingFor !== undefined), 60_000, 'the run to wait for its answer');
      // The run ends while the answer is on its way: before the check, or between the check and the update.
      const [answered] = await Promise.all([run.answer('blue', { stage: 'ask' }).then(() => undefined, (e: unknown) => e), harness.client.workflow.getHandle(run.id).terminate('closing')]);
      if (answered !== undefined) expect(answered).toMatchObject({ code: 'RUN_CLOSED' });
    }
  });

  test('validate() reports what `agent-pipeline validate` does, and start() refuses it before a run exists (issue 21)', async () => {
    const broken = { name: 'late-failure', stages: [{ id: 'a', prompt: 'implemnt' }, { id: 'b', prompt: 'Use {{inputs.nope}}.' }] };
    const report = await client.validate(broken, { baseDir: CLI_FIXTURES });
    expect(report.problems.map((p) => p.field)).toEqual(['stages[0].prompt', 'stages[1].prompt {{inputs.nope}}']);
    const err = await client.start(broken, { baseDir: CLI_FIXTURES, id: 'never-started-late-failure' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PipelineInvalidError);
    expect((err as PipelineInvalidError).problems).toEqual(report.problems);
    await expect(client.getRun('never-started-late-failure').status()).rejects.toBeInstanceOf(RunNotFoundError);
    expect((await client.validate(path.join(CLI_FIXTURES, 'gates.yaml'))).problems).toEqual([]);
  });

  test('typed errors: invalid file, unknown run, unreachable server', async () => {
    const invalid = await client.start(path.join(CLI_FIXTURES, '..', 'pipelines', 'does-not-exist.yaml')).catch((e: unknown) => e);
    expect(invalid).toMatchObject({ code: 'FILE_UNREADABLE' });
    const bad = await client.start(await harness.writePipeline('bad', 'name: bad\nstages:\n  - id: a\n    prompt: Do the work.\n    retries: -1\n')).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(PipelineInvalidError);
    expect((bad as PipelineInvalidError).problems).toEqual([expect.objectContaining({ field: 'stages[0].retries', line: 5 })]);
    await expect(client.getRun('no-such-run').status()).rejects.toBeInstanceOf(RunNotFoundError);
    await expect(PipelineClient.connect({ address: '127.0.0.1:1', env: {} })).rejects.toBeInstanceOf(TemporalUnavailableError);
    expect(inject('temporalAddress')).toBe(client.address);
  });

  test('schedules: create, list, trigger a run, delete', async () => {
    const id = `library-schedule-${Math.random().toString(36).slice(2, 8)}`;
    // An id its runs' ids could not start with is refused, named once, as a schedule's.
    const fixture = path.join(CLI_FIXTURES, 'scheduled.yaml');
    await expect(client.schedules.create(fixture, { id: '-nightly', every: '1h' })).rejects.toThrow(
      /^\[INPUT_INVALID\] schedule id "-nightly" starts with "-", which a command line reads as an option \(`agent-pipeline schedule describe -nightly` would fail\)/,
    );
    await expect(client.schedules.create(fixture, { id: '..', every: '1h' })).rejects.toThrow(/^\[INPUT_INVALID\] "\.\." cannot be a schedule id: it names a folder/);
    const created = await client.schedules.create(path.join(CLI_FIXTURES, 'scheduled.yaml'), { id, every: '1h', inputs: { topic: 'tea' }, paused: true });
    expect(created).toMatchObject({ scheduleId: id, pipeline: 'cli-scheduled', spec: 'every 1h', inputs: { topic: 'tea' }, paused: true });
    expect((await client.schedules.list()).map((s) => s.scheduleId)).toContain(id);
    await expect(client.schedules.create(path.join(CLI_FIXTURES, 'scheduled.yaml'), { id, every: '1h' })).rejects.toMatchObject({ code: 'SCHEDULE_EXISTS' });
    await client.schedules.trigger(id);
    const described = await eventually(() => client.schedules.describe(id), (s) => s.recentRuns.length > 0, 60_000, 'the triggered run');
    await expect(client.getRun(described.recentRuns[0].runId).result()).resolves.toMatchObject({ status: 'completed', inputs: { topic: 'tea' } });
    await client.schedules.delete(id);
    await expect(client.schedules.describe(id)).rejects.toMatchObject({ code: 'SCHEDULE_NOT_FOUND' });
  });
});
