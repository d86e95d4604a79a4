import type { Command } from 'commander';
import type { Client } from '@temporalio/client';
import type { PipelineSchedules } from '../../library/schedules.js';
import { withClient } from '../connect.js';
import { UsageError } from '../errors.js';
import { checkNewIdFlag, collect, parseDurationMs, readInputFlags, parseOverlap } from '../options.js';
import { formatColumns, formatTime, printJson, printLine } from '../output.js';
import { runInputModules } from './start.js';
import type { OverlapFlag, ScheduleJson } from '../../library/schedule-spec.js';
import type { DurationText } from '../../pipeline/schema.js';
import { agentPipelineCommand } from '../../pipeline/shell-words.js';

interface CreateOptions {
  cron?: string;
  every?: { text: DurationText; ms: number };
  id?: string;
  input?: string[];
  overlap: OverlapFlag;
  note?: string;
  paused?: boolean;
  json?: boolean;
  filesFromWorker?: boolean;
}

/** The status of each schedule's most recent run, for `schedule list` ("last result"). */
async function lastRunStatus(client: Client, schedule: ScheduleJson): Promise<string> {
  const last = schedule.recentRuns.at(-1);
  if (!last) return 'no runs yet';
  try {
    const { status } = await client.workflow.getHandle(last.runId).describe();
    return `${status.name.toLowerCase()} (${last.runId})`;
  } catch {
    return `unknown (${last.runId})`;
  }
}

function describeLines(s: ScheduleJson, lastRun: string): string[] {
  return [
    `Schedule ${s.scheduleId}${s.paused ? ' (paused)' : ''}`,
    `  pipeline:  ${s.pipeline ?? '?'}${s.pipelineFile ? ` (${s.pipelineFile})` : ''}`,
    `  when:      ${s.spec ?? '?'} · overlap ${s.overlap ?? '?'}`,
    `  inputs:    ${Object.entries(s.inputs).map(([k, v]) => `${k}=${v}`).join(', ') || '(none)'}`,
    `  next runs: ${s.paused ? '(paused)' : s.nextRunAt.slice(0, 3).map((t) => formatTime(t)).join(', ') || '(none)'}`,
    `  last run:  ${lastRun}`,
    `  files:     ${s.bundle ? `bundled (${s.bundle.files} files, bundle ${s.bundle.hash.slice(0, 12)}); \`schedule update FILE\` re-bundles` : 'read by the worker at each run'}`,
    ...(s.signature ? [`  signed:    by key ${s.signature.keyId}, runs accepted until ${formatTime(s.signature.expiresAt)}; \`schedule update FILE\` signs again`] : []),
    ...(s.note ? [`  note:      ${s.note}`] : []),
  ];
}

export function addScheduleCommands(program: Command): void {
  const schedule = program
    .command('schedule')
    .description('run a pipeline on a schedule (Temporal Schedules, shown in the Web UI)');

  schedule
    .command('create')
    .description('create a schedule that starts a run of a pipeline file on a cron expression or an interval')
    .argument('<file>', 'pipeline YAML file; it and every file it names are bundled now, and every run carries that bundle (`schedule update FILE` re-bundles)')
    .option('--cron <expr>', 'cron expression, e.g. "0 9 * * MON-FRI" (UTC)')
    .option('--every <duration>', 'interval, e.g. 30m, 1h, 1d', (text: string) => ({ text: text.trim() as DurationText, ms: parseDurationMs(text) }))
    .option('--id <id>', 'schedule id (default: the pipeline name)')
    .option('-i, --input <key=value>', 'a pipeline input for every run (repeatable); key=@FILE reads the value from a file now, key=@- from standard input, key=@@text is the literal @text', collect)
    .option('--overlap <policy>', 'when a run is due while the last still runs: skip, buffer-one, buffer-all, cancel-other, terminate-other, allow-all', parseOverlap, 'skip')
    .option('--note <text>', 'a note shown with the schedule')
    .option('--paused', 'create it paused')
    .option('--json', 'print {"scheduleId", "bundle"}')
    .option('--files-from-worker', 'do not bundle the files: workers read them at each run from the same path on their own host')
    .addHelpText('after', '\nExamples:\n  agent-pipeline schedule create nightly.yaml --cron "0 2 * * *" --input branch=main\n  agent-pipeline schedule create health.yaml --every 1h --overlap buffer-one')
    .action(async (file: string, opts: CreateOptions) => {
      if (Boolean(opts.cron) === Boolean(opts.every)) throw new UsageError('give exactly one of --cron EXPR or --every DURATION');
      checkNewIdFlag(opts.id, 'schedule');
      const { prepareRunInput, describeFiles, summarizeBundle } = await runInputModules();
      // Checked before connecting: an invalid file exits 2 whether or not Temporal is up.
      const input = await prepareRunInput(file, { inputs: await readInputFlags(opts.input ?? []), filesFromWorker: opts.filesFromWorker });
      await withClient(async ({ pipeline }) => {
        const { scheduleId } = await pipeline.schedules.createPrepared(input, {
          id: opts.id, cron: opts.cron, every: opts.every?.text, overlap: opts.overlap, note: opts.note, paused: opts.paused,
        });
        if (opts.json) return printJson({ scheduleId, bundle: input.bundle ? summarizeBundle(input.bundle) : null });
        printLine(`Created schedule ${scheduleId}: ${opts.cron ? `cron ${opts.cron}` : `every ${opts.every!.text}`}, overlap ${opts.overlap}`);
        printLine(`${describeFiles(input)}${input.bundle ? '; edits to them reach the runs after `agent-pipeline schedule update FILE`' : ''}`);
        printLine(`See it:     ${agentPipelineCommand('schedule describe', scheduleId)}`);
        printLine(`Run it now: ${agentPipelineCommand('schedule trigger', scheduleId)}`);
      });
    });

  schedule
    .command('update')
    .description("bundle a pipeline file's files again into an existing schedule, so its next runs carry the edited files")
    .argument('<file>', 'pipeline YAML file, usually the one the schedule was created from, after editing it or its agent and step files')
    .option('--id <id>', 'schedule id (default: the pipeline name)')
    .option('-i, --input <key=value>', 'change a pipeline input for every run (repeatable; key=@FILE, key=@- and key=@@text as for create); the others stay as they were', collect)
    .option('--files-from-worker', 'stop bundling: workers read the files at each run from the same path on their own host')
    .option('--json', 'print {"scheduleId", "bundle"}')
    .addHelpText('after', '\nExample:\n  agent-pipeline schedule update nightly.yaml\n\nTiming, overlap policy, pause state and note stay as they are.')
    .action(async (file: string, opts: { id?: string; input?: string[]; filesFromWorker?: boolean; json?: boolean }) => {
      const { describeFiles, summarizeBundle } = await runInputModules();
      await withClient(async ({ pipeline }) => {
        const { scheduleId, input } = await pipeline.schedules.update(file, {
          id: opts.id, inputs: await readInputFlags(opts.input ?? []), filesFromWorker: opts.filesFromWorker,
        });
        if (opts.json) return printJson({ scheduleId, bundle: input.bundle ? summarizeBundle(input.bundle) : null });
        printLine(`Updated schedule ${scheduleId}: its next runs use ${file}`);
        printLine(describeFiles(input));
      });
    });

  schedule
    .command('list')
    .description('list pipeline schedules with their next run times and last result')
    .option('--json', 'print {"schedules": [...]} (docs/cli.md)')
    .action(async (opts: { json?: boolean }) => {
      await withClient(async ({ client, pipeline }) => {
        const schedules = await pipeline.schedules.list();
        if (opts.json) return printJson({ schedules });
        if (schedules.length === 0) return printLine('No schedules. Create one with `agent-pipeline schedule create FILE --every 1h`.');
        const rows = await Promise.all(
          schedules.map(async (s) => [s.scheduleId, s.pipeline ?? '', s.spec ?? '', s.paused ? 'paused' : formatTime(s.nextRunAt[0]), await lastRunStatus(client, s)]),
        );
        formatColumns([['SCHEDULE', 'PIPELINE', 'WHEN', 'NEXT RUN', 'LAST RUN'], ...rows]).forEach((l) => printLine(l));
      });
    });

  schedule
    .command('describe')
    .description('show a schedule: pipeline, inputs, timing, next runs, recent runs')
    .argument('<id>', 'schedule id')
    .option('--json', 'print the schedule as JSON (docs/cli.md)')
    .action(async (id: string, opts: { json?: boolean }) => {
      await withClient(async ({ client, pipeline }) => {
        const s = await pipeline.schedules.describe(id);
        if (opts.json) return printJson(s);
        describeLines(s, await lastRunStatus(client, s)).forEach((l) => printLine(l));
        for (const run of s.recentRuns) printLine(`  started ${formatTime(run.startedAt)}: ${run.runId}`);
      });
    });

  const simple: [string, string, (schedules: PipelineSchedules, id: string, note?: string) => Promise<void>, string][] = [
    ['pause', 'stop starting runs until unpaused (runs in progress go on)', (s, id, note) => s.pause(id, note), 'paused'],
    ['unpause', 'start runs again', (s, id, note) => s.unpause(id, note), 'unpaused'],
    ['trigger', 'start a run now, whatever the timing and overlap policy', (s, id) => s.trigger(id), 'triggered'],
    ['delete', 'delete the schedule (runs it started go on)', (s, id) => s.delete(id), 'deleted'],
  ];
  for (const [name, description, act, done] of simple) {
    const command = schedule.command(name).description(description).argument('<id>', 'schedule id').option('--json', `print {"scheduleId", "action": "${done}"}`);
    if (name === 'pause' || name === 'unpause') command.option('--note <text>', 'why; shown with the schedule');
    command.action(async (id: string, opts: { json?: boolean; note?: string }) => {
      await withClient(async ({ pipeline }) => {
        await act(pipeline.schedules, id, opts.note);
        if (opts.json) return printJson({ scheduleId: id, action: done });
        printLine(`Schedule ${id} ${done}.`);
        if (name === 'trigger') printLine(`See its runs: ${agentPipelineCommand('schedule describe', id)}`);
      });
    });
  }
}
