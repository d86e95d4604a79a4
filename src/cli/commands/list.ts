import { InvalidArgumentError, type Command } from 'commander';
import { describeRunListSearchAttributes, RUN_LIST_STATUSES, toRunListStatus, type RunListStatus } from '../../library/run-list-status.js';
import { formatDuration } from '../../pipeline/duration.js';
import { withClient } from '../connect.js';
import { parseDurationMs, parsePositiveInt } from '../options.js';
import { formatColumns, formatTime, formatUsd, printJson, printLine } from '../output.js';

/** One row of `list --json` (the library's list item). */
export type { RunListItem } from '../../library/list-runs.js';

interface ListOptions {
  pipeline?: string;
  status?: RunListStatus;
  since?: number;
  limit: number;
  json?: boolean;
}

/** A `--status` value, checked. @throws InvalidArgumentError naming the values allowed */
export function parseStatus(value: string): RunListStatus {
  const status = toRunListStatus(value);
  if (!status) throw new InvalidArgumentError(`expected one of ${RUN_LIST_STATUSES.join(', ')}, got "${value}"`);
  return status;
}

export function addListCommand(program: Command): void {
  program
    .command('list')
    .description('list runs: running ones first, then the most recently ended; filter by pipeline, status, start time')
    .option('--pipeline <name>', 'only runs of this pipeline (the `name` in its file)')
    .option('--status <status>', 'running, waiting (for a person), blocked (a question to answer), completed, failed, cancelled, terminated or timed_out', parseStatus)
    .option('--since <duration>', 'only runs started within this long, e.g. 2h or 7d', parseDurationMs)
    .option('--limit <n>', 'show at most this many runs', parsePositiveInt, 20)
    .option('--json', 'print {"runs": [...]} (docs/cli.md)')
    .addHelpText('after', `\nFilters on the search attributes ${describeRunListSearchAttributes()} of the visibility store; a run shows up a moment after it starts.`)
    .action(async (opts: ListOptions) => {
      await withClient(async ({ pipeline }) => {
        const runs = await pipeline.list({ pipeline: opts.pipeline, status: opts.status, sinceMs: opts.since, limit: opts.limit });
        if (opts.json) return printJson({ runs });
        if (runs.length === 0) return printLine('No runs match.');
        const now = Date.now();
        const rows = runs.map((r) => [
          r.runId,
          r.pipeline ?? '',
          r.status,
          formatTime(r.startedAt),
          formatDuration((r.closedAt ?? now) - r.startedAt),
          formatUsd(r.costUsd),
          [...r.currentStages, ...r.leaseWaits.map((w) => `${w.stage ?? 'run'} waits for ${w.key} (${w.ahead} ahead)`)].join(','),
          r.forkedFrom ? `${r.forkedFrom.runId} at ${r.forkedFrom.stage}` : '',
        ]);
        formatColumns([['RUN', 'PIPELINE', 'STATUS', 'STARTED', 'DURATION', 'COST', 'RUNNING STAGES', 'FORKED FROM'], ...rows]).forEach((l) => printLine(l));
      });
    });
}
