import { InvalidArgumentError, type Command } from 'commander';
import type { WorkflowExecutionInfo } from '@temporalio/client';
import { formatDuration } from '../../pipeline/duration.js';
import { PIPELINE_WORKFLOW_TYPE } from '../../workflows/messages.js';
import { COST_USD_ATTRIBUTE, CURRENT_STAGES_ATTRIBUTE, PIPELINE_NAME_ATTRIBUTE, RUN_STATUS_ATTRIBUTE } from '../../workflows/search-attributes.js';
import { withClient } from '../connect.js';
import { parseDurationMs, parsePositiveInt } from '../options.js';
import { formatColumns, formatTime, formatUsd, printJson, printLine } from '../output.js';

/** `--status` values and the visibility clause each stands for. */
const STATUS_FILTER: Record<string, string> = {
  running: "ExecutionStatus = 'Running'",
  completed: "ExecutionStatus = 'Completed'",
  failed: "ExecutionStatus = 'Failed'",
  cancelled: "ExecutionStatus = 'Canceled'",
  canceled: "ExecutionStatus = 'Canceled'",
  terminated: "ExecutionStatus = 'Terminated'",
  // A run ended by the pipeline `timeout` or a stage's timeouts fails in Temporal's eyes; the workflow marks it timed_out.
  'timed-out': `(ExecutionStatus = 'TimedOut' OR (ExecutionStatus = 'Failed' AND ${RUN_STATUS_ATTRIBUTE.name} = 'timed_out'))`,
  timed_out: `(ExecutionStatus = 'TimedOut' OR (ExecutionStatus = 'Failed' AND ${RUN_STATUS_ATTRIBUTE.name} = 'timed_out'))`,
  // Waiting for a person is our own state; the workflow keeps it in a search attribute. `blocked` (an agent's
  // question waits for an answer) is one kind of waiting.
  waiting: `ExecutionStatus = 'Running' AND ${RUN_STATUS_ATTRIBUTE.name} IN ('waiting', 'blocked')`,
  blocked: `ExecutionStatus = 'Running' AND ${RUN_STATUS_ATTRIBUTE.name} = 'blocked'`,
};

/** One row of `list --json`. */
export interface RunListItem {
  runId: string;
  pipeline: string | null;
  /** running, waiting (for a person), blocked (an agent's question waits for an answer), completed, failed, cancelled, terminated, timed_out or continued_as_new. */
  status: string;
  startedAt: number;
  closedAt: number | null;
  /** @unit US dollars */
  costUsd: number | null;
  /** Stages running at the last update. */
  currentStages: string[];
}

interface ListOptions {
  pipeline?: string;
  status?: string;
  since?: number;
  limit: number;
  json?: boolean;
}

/** Turns a `--status` value into its visibility clause. @throws InvalidArgumentError naming the values allowed */
export function parseStatus(value: string): string {
  const status = STATUS_FILTER[value.toLowerCase()];
  if (!status) throw new InvalidArgumentError(`expected one of ${Object.keys(STATUS_FILTER).filter((s) => s !== 'canceled' && s !== 'timed-out').join(', ')}, got "${value}"`);
  return status;
}

/** The visibility query for the filters, on our search attributes and Temporal's built-in ones. */
export function buildListQuery(options: Pick<ListOptions, 'pipeline' | 'status' | 'since'>, now = Date.now()): string {
  const quote = (value: string): string => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  const clauses = [`WorkflowType = ${quote(PIPELINE_WORKFLOW_TYPE)}`];
  if (options.pipeline) clauses.push(`${PIPELINE_NAME_ATTRIBUTE.name} = ${quote(options.pipeline)}`);
  if (options.status) clauses.push(options.status);
  if (options.since) clauses.push(`StartTime > ${quote(new Date(now - options.since).toISOString())}`);
  return clauses.join(' AND ');
}

function toItem(info: WorkflowExecutionInfo): RunListItem {
  const execution = info.status.name.toLowerCase();
  const own = info.typedSearchAttributes.get(RUN_STATUS_ATTRIBUTE);
  const refined = (execution === 'running' && (own === 'waiting' || own === 'blocked')) || (execution === 'failed' && own === 'timed_out');
  return {
    runId: info.workflowId,
    pipeline: info.typedSearchAttributes.get(PIPELINE_NAME_ATTRIBUTE) ?? null,
    status: refined ? own! : execution,
    startedAt: info.startTime.getTime(),
    closedAt: info.closeTime?.getTime() ?? null,
    costUsd: info.typedSearchAttributes.get(COST_USD_ATTRIBUTE) ?? null,
    currentStages: info.typedSearchAttributes.get(CURRENT_STAGES_ATTRIBUTE) ?? [],
  };
}

export function addListCommand(program: Command): void {
  program
    .command('list')
    .description('list runs, newest first; filter by pipeline, status, start time')
    .option('--pipeline <name>', 'only runs of this pipeline (the `name` in its file)')
    .option('--status <status>', 'running, waiting (for a person), blocked (a question to answer), completed, failed, cancelled, terminated or timed_out', parseStatus)
    .option('--since <duration>', 'only runs started within this long, e.g. 2h or 7d', parseDurationMs)
    .option('--limit <n>', 'show at most this many runs', parsePositiveInt, 20)
    .option('--json', 'print {"runs": [...]} (docs/cli.md)')
    .addHelpText('after', '\nUses the visibility store (search attributes AgentPipeline, ExecutionStatus, StartTime); a run shows up a moment after it starts.')
    .action(async (opts: ListOptions) => {
      await withClient(async ({ client }) => {
        const runs: RunListItem[] = [];
        for await (const info of client.workflow.list({ query: buildListQuery(opts), pageSize: Math.min(opts.limit, 100) })) {
          runs.push(toItem(info));
          if (runs.length >= opts.limit) break;
        }
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
          r.currentStages.join(','),
        ]);
        formatColumns([['RUN', 'PIPELINE', 'STATUS', 'STARTED', 'DURATION', 'COST', 'RUNNING STAGES'], ...rows]).forEach((l) => printLine(l));
      });
    });
}
