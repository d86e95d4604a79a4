import type { Command } from 'commander';
import { cliMessageOf, InvalidRequestError } from '../../errors.js';
import type { TranscriptEntry } from '../../library/run-transcript.js';
import { withClient, type ConnectedClient } from '../connect.js';
import { EXIT, UsageError } from '../errors.js';
import { parsePositiveInt } from '../options.js';
import { printLine, printNote } from '../output.js';

interface LogsOptions {
  stage: string;
  attempt?: number;
  follow?: boolean;
  raw?: boolean;
}

async function printLogs(connected: ConnectedClient, runId: string, opts: LogsOptions, signal: AbortSignal): Promise<number> {
  const [{ loadModelCatalog }, { readTranscript }, { TranscriptFormatter }] = await Promise.all([
    import('../../activities/backends/models.js'),
    import('../../library/run-transcript.js'),
    import('../transcript.js'),
  ]);
  const formatter = new TranscriptFormatter(loadModelCatalog(process.env));
  try {
    for await (const entry of readTranscript(connected.client, runId, { ...opts, signal })) {
      if (entry.type === 'transcript') printLine(`══ ${runId} · stage ${opts.stage}${takenOver(entry)} · round ${entry.round} · attempt ${entry.attempt} · ${whereFrom(entry)}`);
      else for (const out of opts.raw ? [entry.text] : formatter.format(entry.text)) printLine(out);
    }
  } catch (err) {
    // An unknown stage or no transcript: bad usage (exit 2), said as the library says it.
    if (err instanceof InvalidRequestError) throw new UsageError(cliMessageOf(err), { cause: err });
    throw err;
  }
  return signal.aborted ? EXIT.INTERRUPTED : EXIT.OK;
}

/** For a stage the run (a fork) took over: the run it ran in, whose transcript this is. */
function takenOver(entry: Extract<TranscriptEntry, { type: 'transcript' }>): string {
  return entry.takenOverFrom === undefined ? '' : ` (taken over: run ${entry.takenOverFrom}'s transcript)`;
}

/** The transcript's file, or for one read from a checkpoint in the store, that checkpoint (its files are gone after). */
function whereFrom(entry: Extract<TranscriptEntry, { type: 'transcript' }>): string {
  const { checkpoint } = entry;
  if (!checkpoint) return entry.file;
  return `from checkpoint ${checkpoint.id} of ${checkpoint.takenAt} in ${checkpoint.store} (not in the workspaces folder this host sees; as of that checkpoint)`;
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
      "\nTranscripts live in the run's bookkeeping on the workers (<workspaces>/.agent-pipeline/runs/<run folder>/stages/<stage>/round-R-…/attempt-N.jsonl),\n" +
        'so run this on a machine that sees the workers\' workspaces folder (AGENT_PIPELINE_WORKSPACES: a worker host, or one mounting the same shared volume).\n' +
        "Where that folder holds none (the host is gone), they are read from the run's newest checkpoint in the workers' object store (AGENT_PIPELINE_STORE).\n" +
        'Exit code: 0 printed, 2 unknown run or stage or no transcript, 3 Temporal unreachable, 130 Ctrl-C while following.',
    )
    .action(async (id: string, opts: LogsOptions) => {
      // Loaded here, as every command's own modules are (docs/performance.md, "Command start-up").
      const { interruptSignal } = await import('../../library/follow-run.js');
      const interrupt = interruptSignal();
      try {
        process.exitCode = await withClient((connected) => printLogs(connected, id, opts, interrupt.signal));
        if (process.exitCode === EXIT.INTERRUPTED) printNote('Stopped following; the run goes on.');
      } finally {
        interrupt.dispose();
      }
    });
}
