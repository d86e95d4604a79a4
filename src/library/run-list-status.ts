/*
 * The statuses runs are listed by, and the search attributes they are filtered on, as plain strings: the command line
 * checks `list --status` with them and says them in `list --help` before it loads the Temporal client (list-runs.ts
 * builds the queries).
 */

/**
 * The search attributes of the visibility store that `client.list()` and `list` filter runs on: the project's own
 * (contracts/search-attributes.ts) and Temporal's built-in ones, besides the workflow type every query names. `list
 * --help` and docs/cli.md name these; a test derives them from the queries.
 */
export const RUN_LIST_SEARCH_ATTRIBUTES = ['AgentPipeline', 'AgentPipelineStatus', 'ExecutionStatus', 'StartTime'] as const;

/** `a, b, c and d`: the attributes as `list --help` and docs/cli.md say them. */
export function describeRunListSearchAttributes(quote = ''): string {
  const names = RUN_LIST_SEARCH_ATTRIBUTES.map((name) => `${quote}${name}${quote}`);
  return `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`;
}

/** The run statuses `client.list({ status })` and `list --status` filter on. */
export const RUN_LIST_STATUSES = ['running', 'completed', 'failed', 'cancelled', 'terminated', 'timed_out', 'waiting', 'blocked'] as const;
export type RunListStatus = (typeof RUN_LIST_STATUSES)[number];

/** Other spellings people type (Temporal's `canceled`, `timed-out`), accepted for the status they mean. */
const STATUS_SPELLINGS: Record<string, RunListStatus> = { canceled: 'cancelled', 'timed-out': 'timed_out' };

/** The list status `value` names (any case, either spelling), or `undefined` when it names none. */
export function toRunListStatus(value: string): RunListStatus | undefined {
  const status = value.toLowerCase();
  return (RUN_LIST_STATUSES as readonly string[]).includes(status) ? (status as RunListStatus) : STATUS_SPELLINGS[status];
}
