import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { removeBookkeeping, removeRunWorkspace } from '../activities/workspace/remove-workspace.js';
import { otherRunFolder } from '../activities/workspace/run-folder.js';
import { listRunsOnDisk, type RunOnDisk } from '../activities/workspace/run-list.js';
import { storeFolder } from '../activities/workspace/worker-folder.js';
import type { ObjectStore } from '../store/object-store.js';
import { openStore } from '../store/open-store.js';
import { runKeyPrefix } from '../store/run-keys.js';
import { checkpointsPrefix } from '../activities/checkpoint/keys.js';
import { TemporalUnavailableError } from '../errors.js';
import { withClient } from './connect.js';
import { printNote } from './output.js';

/*
 * What `agent-pipeline prune` does (commands/prune.ts reads its flags and prints the result): which run folders may
 * go, asked of Temporal, and their removal with their bookkeeping and store objects.
 */

/** What `prune` decided about one run folder. */
export interface PruneEntry {
  runId: string;
  /**
   * The Temporal run id of the run's first execution, when its folder is named after it: which of the runs that bore
   * the id this folder is of.
   */
  firstExecutionRunId?: string;
  /** Set when a later run has the id (Temporal says so): this folder is of a run that ended before that one started. */
  earlier?: boolean;
  /** The run's folder; for a run in a lent folder (`workspace.dir`), which has none, its bookkeeping folder. */
  dir: string;
  /** The run's bookkeeping folder, in the workers' own folder under the workspaces root. */
  bookkeeping?: string;
  /** How the run ended, or `running` / `unknown` (no such run in Temporal). */
  status: string;
  /** @format ISO 8601 */
  endedAt?: string;
  removed: boolean;
  warnings: string[];
}

/** Removes the workspaces under `root` of runs that ended before `cutoffMs`, as Temporal confirms (see `--force`). */
export async function pruneWorkspaces(root: string, cutoffMs: number, options: { dryRun: boolean; force: boolean }): Promise<PruneEntry[]> {
  const runs = await listRunsOnDisk(root);
  const entries = runs.map((run): PruneEntry => {
    const first = run.firstExecutionRunId === undefined ? {} : { firstExecutionRunId: run.firstExecutionRunId };
    const entry: PruneEntry = { runId: run.runId ?? run.name, ...first, dir: run.dir ?? run.bookkeeping ?? path.join(root, run.name), status: run.ended?.status ?? 'unknown', removed: false, warnings: [] };
    if (run.bookkeeping) entry.bookkeeping = run.bookkeeping;
    if (run.ended) entry.endedAt = new Date(run.ended.endedAt).toISOString();
    if (run.runId === undefined) entry.warnings.push('no record names the run this folder belongs to; it is kept (remove it by hand if it is not wanted)');
    return entry;
  });
  // A record is not enough: a run id can be reused, and a run can be reset. Temporal says whether the run is still
  // going; without it (`--force`) only runs whose bookkeeping (out of every agent's reach) records their end are removed.
  const known = entries.filter((_, i) => runs[i].runId !== undefined);
  if (!options.force && known.length > 0) {
    await withClient(async ({ client }) => confirmWithTemporal(client, known)).catch((err: unknown) => {
      if (err instanceof TemporalUnavailableError) printNote('Nothing was removed: prune asks Temporal whether each run has ended. Use --force to trust the records runs leave in their bookkeeping.');
      throw err;
    });
  }
  const store = openStore(process.env, { defaultDir: storeFolder(root) });
  for (const [i, entry] of entries.entries()) {
    const run = runs[i];
    if (run.runId === undefined || entry.status === 'running' || !entry.endedAt || Date.parse(entry.endedAt) > cutoffMs) continue;
    if (options.force && run.recordsInTree) {
      entry.warnings.push('its only records are inside its own folder, where its agent could have written them (a run that ended before the worker kept them apart); it is kept: prune without --force asks Temporal');
      continue;
    }
    // The id's objects go with its latest run, as Temporal confirms it (with --force: when no other run of the id has a
    // folder here); an earlier run takes only its own checkpoints, the rest may be a later run's.
    const shared = options.force ? (await otherRunFolder(root, entry)) !== undefined : entry.earlier === true;
    const objects = shared ? checkpointsPrefix(entry) : runKeyPrefix(entry.runId);
    entry.removed = options.dryRun || ((await removeRun(root, run, entry)) && (await removeRunObjects(store, objects, entry)));
  }
  return entries;
}

/** Removes the run's folder, then (once that is gone) its bookkeeping; warnings go into `entry`. @returns whether both are gone */
async function removeRun(root: string, run: RunOnDisk, entry: PruneEntry): Promise<boolean> {
  if (run.dir) entry.warnings.push(...(await removeRunWorkspace(root, run.dir, run.ended?.pushed)));
  if (run.dir && existsSync(run.dir)) return false;
  if (run.bookkeeping) entry.warnings.push(...(await removeBookkeeping(root, run.bookkeeping)));
  return !run.bookkeeping || !existsSync(run.bookkeeping);
}

/**
 * Deletes the run's objects in the store under `prefix`: of the id's latest run, everything under its id
 * (`runs/<hash of its id>/`: checkpoints, whole final answers, claimed payloads); of an earlier run of the id, its own
 * checkpoints alone, and the store's sweep deletes the rest once Temporal no longer keeps the id. Claims of no known
 * run (`claims/`) stay (docs/deployment.md). @returns whether they are gone
 */
async function removeRunObjects(store: ObjectStore, prefix: string, entry: PruneEntry): Promise<boolean> {
  try {
    await store.deletePrefix(prefix);
    return true;
  } catch (err) {
    entry.warnings.push(`its objects in the store ${store.description} were not deleted: ${(err as Error).message}`);
    return false;
  }
}

/**
 * Sets each entry's status and end from Temporal's latest run of that id; a folder of an unknown id is kept. A folder of
 * an earlier run of the id (the latest run's first execution is another one) gets that run's end: its first
 * execution's, or, when that one continued as new, what the run's end record says, else the latest run's start (the
 * earlier run had ended by then; the same when Temporal no longer keeps that execution).
 */
async function confirmWithTemporal(client: Client, entries: PruneEntry[]): Promise<void> {
  for (const entry of entries) {
    // What the run's end record says, if it left one (pruneWorkspaces filled them in).
    const recorded = { status: entry.status, endedAt: entry.endedAt };
    try {
      const described = await client.workflow.getHandle(entry.runId).describe();
      entry.status = described.status.name.toLowerCase();
      entry.endedAt = described.closeTime?.toISOString();
      const latestFirst = described.raw.workflowExecutionInfo?.firstRunId;
      if (entry.firstExecutionRunId === undefined || !latestFirst || latestFirst === entry.firstExecutionRunId) continue;
      entry.earlier = true;
      // Gone once the namespace's retention passed after it closed: the later run is all Temporal says then.
      const first = await client.workflow
        .getHandle(entry.runId, entry.firstExecutionRunId)
        .describe()
        .catch((err: unknown) => {
          if (err instanceof WorkflowNotFoundError) return undefined;
          throw err;
        });
      if (first && first.status.name !== 'CONTINUED_AS_NEW') {
        entry.status = first.status.name.toLowerCase();
        entry.endedAt = first.closeTime?.toISOString();
      } else {
        entry.status = recorded.endedAt ? recorded.status : 'closed';
        entry.endedAt = recorded.endedAt ?? described.startTime.toISOString();
      }
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
      entry.status = 'unknown';
      entry.endedAt = undefined;
      entry.warnings.push('no run with this id is known to Temporal; the folder is kept (remove it by hand if it is not wanted)');
    }
  }
}
