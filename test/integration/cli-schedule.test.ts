import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import type { RunJson } from '../../src/cli/json.js';
import { scheduleJson, type ScheduleJson } from '../../src/library/schedule-spec.js';
import { CLI_FIXTURES, eventually, parseJson, pastedArguments, runCli, runCliCommands } from './cli-helpers.js';

const SCHEDULED = path.join(CLI_FIXTURES, 'scheduled.yaml');

describe('schedules as a user runs them', () => {
  let harness: Harness;
  let env: NodeJS.ProcessEnv;
  const scheduleId = `cli-every-${Math.random().toString(36).slice(2, 8)}`;

  beforeAll(async () => {
    harness = await createHarness('cli-schedule', { scenario: path.join(CLI_FIXTURES, 'scenario.yaml') });
    env = harness.env;
  });
  afterAll(async () => {
    await harness?.client.schedule.getHandle(scheduleId).delete().catch(() => {});
    await harness?.close();
  });

  /**
   * The same description through the client in this process, for the waits between commands: polling `schedule
   * describe` started a Node process every half second. The commands are each checked once where the test reads them.
   */
  const describeHere = async (): Promise<ScheduleJson> => scheduleJson(await harness.client.schedule.getHandle(scheduleId).describe());

  test('a schedule fires on the dev server and its run completes; pause, unpause, trigger, list and delete work', async () => {
    const created = await runCli(['schedule', 'create', SCHEDULED, '--every', '2s', '--id', scheduleId, '--input', 'topic=coffee', '--overlap', 'skip'], env);
    expect(created.exitCode, created.stderr).toBe(0);
    expect(created.stdout.split('\n')[0]).toBe(`Created schedule ${scheduleId}: every 2s, overlap skip`);

    const fired = await eventually(describeHere, (s) => s.recentRuns.length > 0, 30_000, 'the schedule firing');
    const runId = fired.recentRuns[0].runId;
    expect(runId.startsWith(`${scheduleId}-`)).toBe(true);
    // From here the commands that follow one another run back to back in one process (a command costs a Node process);
    // `schedule create` above ran as a user runs it. Pausing first stops further runs while this one is checked, and
    // leaves it running.
    const [pause, watched, pausedJson, human] = await runCliCommands(
      [['schedule', 'pause', scheduleId, '--note', 'checking'], ['watch', runId, '--json'], ['schedule', 'describe', scheduleId, '--json'], ['schedule', 'describe', scheduleId]],
      env,
      180_000,
    );
    expect(pause.exitCode, pause.stderr).toBe(0);
    expect(watched.exitCode, watched.stderr).toBe(0);
    expect(parseJson<RunJson>(watched)).toMatchObject({ runId, pipeline: 'cli-scheduled', status: 'completed', inputs: { topic: 'coffee' } });

    const paused = parseJson<ScheduleJson>(pausedJson);
    expect(paused).toMatchObject({
      scheduleId,
      pipeline: 'cli-scheduled',
      pipelineFile: SCHEDULED,
      spec: 'every 2s',
      overlap: 'skip',
      inputs: { topic: 'coffee' },
      paused: true,
      note: 'checking',
    });
    expect(paused.recentRuns.map((r) => r.runId)).toContain(runId);
    expect(human.stdout).toContain(`Schedule ${scheduleId} (paused)`);
    expect(human.stdout).toMatch(/^ {2}last run: +(completed|running) \(/m);

    // The list comes from the server's visibility store, a moment behind: waited for here, then listed once.
    const listsPaused = (schedules: ScheduleJson[]): boolean => schedules.some((s) => s.scheduleId === scheduleId && s.paused);
    const listHere = async (): Promise<ScheduleJson[]> => {
      const schedules: ScheduleJson[] = [];
      for await (const summary of harness.client.schedule.list()) schedules.push(scheduleJson(summary));
      return schedules;
    };
    await eventually(listHere, listsPaused, 30_000, 'the schedule listed as paused');
    const runsBefore = (await describeHere()).recentRuns.length;
    const [listedJson, triggered] = await runCliCommands([['schedule', 'list', '--json'], ['schedule', 'trigger', scheduleId, '--json']], env);
    const listed = parseJson<{ schedules: ScheduleJson[] }>(listedJson).schedules;
    expect(listsPaused(listed), JSON.stringify(listed)).toBe(true);
    expect(listed.find((s) => s.scheduleId === scheduleId)?.pipeline).toBe('cli-scheduled');
    expect(parseJson(triggered)).toEqual({ scheduleId, action: 'triggered' });
    await eventually(describeHere, (s) => s.recentRuns.length > runsBefore, 30_000, 'the triggered run');

    const [unpaused, unpausedJson, duplicate, deleted, gone] = await runCliCommands(
      [
        ['schedule', 'unpause', scheduleId],
        ['schedule', 'describe', scheduleId, '--json'],
        ['schedule', 'create', SCHEDULED, '--every', '1h', '--id', scheduleId],
        ['schedule', 'delete', scheduleId],
        ['schedule', 'describe', scheduleId],
      ],
      env,
    );
    expect(unpaused.stdout).toBe(`Schedule ${scheduleId} unpaused.`);
    expect(parseJson<ScheduleJson>(unpausedJson).paused).toBe(false);

    expect(duplicate.exitCode, duplicate.stderr).toBe(2);
    expect(duplicate.stderr).toContain(`[SCHEDULE_EXISTS] a schedule "${scheduleId}" exists already`);

    expect(deleted.exitCode, deleted.stderr).toBe(0);
    expect(gone.exitCode, gone.stderr).toBe(2);
    expect(gone.stderr).toContain(`[SCHEDULE_NOT_FOUND] no schedule "${scheduleId}"`);
  });

  test('`schedule update` with a renamed pipeline: its runs are listed under the new name, and describe names the new file', async () => {
    const id = `cli-renamed-${Math.random().toString(36).slice(2, 8)}`;
    const renamed = await harness.writePipeline('cli-renamed', (await readFile(SCHEDULED, 'utf8')).replace(/^name: .*$/m, 'name: cli-renamed-pipeline'));
    try {
      const [created, updated] = await runCliCommands(
        [['schedule', 'create', SCHEDULED, '--every', '1h', '--id', id, '--input', 'topic=tea', '--paused'], ['schedule', 'update', renamed, '--id', id]],
        env,
      );
      expect(created.exitCode, created.stderr).toBe(0);
      expect(updated.exitCode, updated.stderr).toBe(0);
      const describeIt = async (): Promise<ScheduleJson> => scheduleJson(await harness.client.schedule.getHandle(id).describe());
      // The run carried the new pipeline, but was listed under the old name: `list --pipeline` missed it.
      await harness.client.schedule.getHandle(id).trigger();
      const runId = (await eventually(describeIt, (s) => s.recentRuns.length > 0, 30_000, 'the triggered run')).recentRuns[0].runId;
      const listed = await eventually(
        async () => parseJson<{ runs: { runId: string; pipeline: string }[] }>(await runCli(['list', '--pipeline', 'cli-renamed-pipeline', '--json'], env)).runs,
        (runs) => runs.length > 0,
        30_000,
        'the run listed under its pipeline',
      );
      expect(listed.map((r) => r.runId)).toEqual([runId]);
      expect(await describeIt()).toMatchObject({ pipeline: 'cli-renamed-pipeline', pipelineFile: renamed });
    } finally {
      await harness.client.schedule.getHandle(id).delete().catch(() => {});
    }
  });

  test('the commands it prints run, pasted into a shell, on the schedule named, whatever its id holds', async () => {
    const id = `it's $(touch pwned) night; echo ${Math.random().toString(36).slice(2, 8)}`;
    const scratch = await mkdtemp(path.join(tmpdir(), 'schedule-paste-'));
    try {
      const [created, triggered] = await runCliCommands([['schedule', 'create', SCHEDULED, '--every', '1h', '--id', id, '--paused'], ['schedule', 'trigger', id]], env);
      expect(created.exitCode, created.stderr).toBe(0);
      expect(triggered.exitCode, triggered.stderr).toBe(0);
      const printed = [...created.stdout.split('\n'), ...triggered.stdout.split('\n')].filter((line) => /^(See it|Run it now|See its runs):/.test(line));
      // The id went into the lines as it was: pasted, `$(touch pwned)` ran and `; echo` started another command.
      expect(await Promise.all(printed.map((line) => pastedArguments(line, scratch)))).toEqual([
        ['schedule', 'describe', id],
        ['schedule', 'trigger', id],
        ['schedule', 'describe', id],
      ]);
      expect(await readdir(scratch)).toEqual([]);
    } finally {
      await harness.client.schedule.getHandle(id).delete().catch(() => {});
      await rm(scratch, { recursive: true, force: true });
    }
  });

  test('a cron expression the server refuses is a usage error naming cron, the value and the form', async () => {
    const [fields, range] = await runCliCommands(
      [
        ['schedule', 'create', SCHEDULED, '--cron', '0 2 * *', '--id', 'bad-cron-fields'],
        ['schedule', 'create', SCHEDULED, '--cron', '99 2 * * *', '--id', 'bad-cron-range'],
      ],
      env,
    );
    for (const [result, value] of [[fields, '0 2 * *'], [range, '99 2 * * *']] as const) {
      expect(result.exitCode, result.stderr).toBe(2);
      expect(result.stderr).toContain(`[INVALID_REQUEST] cron: "${value}" is not a schedule Temporal accepts (`);
      expect(result.stderr).toContain('write five fields, minute hour day-of-month month day-of-week, such as "0 2 * * *"');
    }
  });
});
