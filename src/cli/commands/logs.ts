import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import type { StageStatus } from '../../pipeline/run-state.js';
import { loadModelCatalog } from '../../activities/backends/models.js';
import { runFolder } from '../../activities/workspace/run-folder.js';
import { loadConfig } from '../../config.js';
import { withClient, type ConnectedClient } from '../connect.js';
import { EXIT, UsageError } from '../errors.js';
import { interruptSignal } from '../../library/follow-run.js';
import { parsePositiveInt } from '../options.js';
import { printLine, printNote } from '../output.js';
import { readRun } from '../../library/run-reader.js';
import { readLines } from '../tail-file.js';
import { listTranscripts, stageFolder, type TranscriptFile } from '../transcript-files.js';
import { TranscriptFormatter } from '../transcript.js';

interface LogsOptions {
  stage: string;
  attempt?: number;
  follow?: boolean;
  raw?: boolean;
}

/** How often `--follow` re-reads the run to learn whether the stage still runs. @unit milliseconds */
const RUN_POLL_MS = 2_000;
const FINISHED: ReadonlySet<StageStatus> = new Set(['completed', 'failed', 'skipped', 'cancelled']);

async function printLogs(connected: ConnectedClient, runId: string, opts: LogsOptions, signal: AbortSignal): Promise<number> {
  const { state } = await readRun(connected.client, runId);
  const stage = state.stages.find((s) => s.id === opts.stage);
  if (!stage) throw new UsageError(`run ${runId} has no stage "${opts.stage}"; its stages: ${state.stages.map((s) => s.id).join(', ')}`);
  // The workspace the worker reported; before any stage has, where this machine's settings put it.
  const ownFolder = runFolder(loadConfig().workspacesRoot, runId);
  const workspace = state.workspace ?? stage.result?.workspace ?? ownFolder;
  // A run in a lent folder (`workspace.dir`) keeps its transcripts in its own folder, not in the lent one.
  const folder = existsSync(stageFolder(workspace, opts.stage)) ? stageFolder(workspace, opts.stage) : stageFolder(ownFolder, opts.stage);
  let lastPoll = 0;
  let status = stage.status;
  const stageStatus = async (): Promise<StageStatus> => {
    if (Date.now() - lastPoll >= RUN_POLL_MS) {
      lastPoll = Date.now();
      status = (await readRun(connected.client, runId)).state.stages.find((s) => s.id === opts.stage)?.status ?? status;
    }
    return status;
  };
  // A pending stage has yet to start and a waiting one may resume (an answer, a retry): only these are over.
  const stageOver = async (): Promise<boolean> => FINISHED.has(await stageStatus());
  const wanted = async (): Promise<TranscriptFile[]> => (await listTranscripts(folder)).filter((t) => opts.attempt === undefined || t.attempt === opts.attempt);

  const printed = new Set<string>();
  while (!signal.aborted) {
    const pending = (await wanted()).filter((t) => !printed.has(t.file));
    if (pending.length === 0) {
      if (!opts.follow || (await stageOver())) break;
      await sleep(RUN_POLL_MS / 4, undefined, { signal }).catch(() => {});
      continue;
    }
    for (const [i, transcript] of pending.entries()) {
      printed.add(transcript.file);
      // Only the newest transcript can still grow; it is over when a newer one appears or the stage stops running.
      const follow = Boolean(opts.follow) && i === pending.length - 1;
      // The status may lag the file by a poll: a transcript that exists belongs to a stage that has started.
      const isDone = async (): Promise<boolean> =>
        (await wanted()).some((t) => !printed.has(t.file)) || !['pending', 'running'].includes(await stageStatus());
      printLine(`══ ${runId} · stage ${opts.stage} · round ${transcript.round} · attempt ${transcript.attempt} · ${transcript.file}`);
      const formatter = new TranscriptFormatter(loadModelCatalog(process.env));
      for await (const line of readLines(transcript.file, { follow, isDone, signal })) {
        for (const out of opts.raw ? [line] : formatter.format(line)) printLine(out);
      }
    }
    if (!opts.follow) break;
  }
  if (signal.aborted) return EXIT.INTERRUPTED;
  if (printed.size === 0) {
    const which = opts.attempt === undefined ? 'no transcript' : `no transcript of attempt ${opts.attempt}`;
    throw new UsageError(
      `[TRANSCRIPT_NOT_FOUND] ${which} in ${folder}. The stage has not run yet, or this machine does not see the workers' workspaces folder (set AGENT_PIPELINE_WORKSPACES to it, or run logs on a worker host)`,
    );
  }
  return EXIT.OK;
}

export function addLogsCommand(program: Command): void {
  program
    .command('logs')
    .description("print a stage's agent transcript readably (text, tool calls, cost per turn)")
    .argument('<id>', 'run id')
    .requiredOption('--stage <stage>', 'the stage')
    .option('--attempt <n>', 'only this attempt (default: every attempt of every round, oldest first)', parsePositiveInt)
    .option('-f, --follow', 'keep printing while the stage runs, moving on to retries and new rounds')
    .option('--raw', 'print the stream-json lines as saved')
    .addHelpText(
      'after',
      "\nTranscripts live in the run's workspace on the workers (<workspace>/.agent-pipeline/stages/<stage>/round-R-…/attempt-N.jsonl),\n" +
        'so run this on a machine that sees the workers\' workspaces folder (a worker host, or one mounting the same shared volume).\n' +
        'Exit code: 0 printed, 2 unknown run or stage or no transcript, 3 Temporal unreachable, 130 Ctrl-C while following.',
    )
    .action(async (id: string, opts: LogsOptions) => {
      const interrupt = interruptSignal();
      try {
        process.exitCode = await withClient((connected) => printLogs(connected, id, opts, interrupt.signal));
        if (process.exitCode === EXIT.INTERRUPTED) printNote('Stopped following; the run goes on.');
      } finally {
        interrupt.dispose();
      }
    });
}
