/*
 * The statuses runs are listed by, as plain strings: the command line checks `list --status` with them before it
 * loads the Temporal client (list-runs.ts builds the queries).
 */

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
