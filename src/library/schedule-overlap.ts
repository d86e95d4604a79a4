import type { ScheduleOverlapPolicy } from '@temporalio/client';

/*
 * A leaf of plain strings (the SDK's ScheduleOverlapPolicy values), so the command line checks `--overlap` without
 * loading the Temporal client.
 */

/** `--overlap` values: what happens when a run is due while the previous one still runs. */
export const OVERLAP_POLICIES = {
  skip: 'SKIP',
  'buffer-one': 'BUFFER_ONE',
  'buffer-all': 'BUFFER_ALL',
  'cancel-other': 'CANCEL_OTHER',
  'terminate-other': 'TERMINATE_OTHER',
  'allow-all': 'ALLOW_ALL',
} as const satisfies Record<string, ScheduleOverlapPolicy>;
export type OverlapFlag = keyof typeof OVERLAP_POLICIES;
