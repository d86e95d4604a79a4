import type { Client } from '@temporalio/client';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { holdLeases, LeaseClient } from '../leases/lease-client.js';
import { folderKey, folderLeaseKey, releaseEndedHolders, sharedFolderKey, type FolderWait } from './folder-lease.js';

/*
 * A folder lent to one run (`workspace.dir`) is never inside, nor around, a folder lent to another run at the same
 * time. The folder's own key (folder-lease.ts) keeps two runs out of one folder; without this, a run lent `/srv/work`
 * could replace `/srv/work/a` (which another run was checked into and waits for) with a symlink leading out of every
 * allowed folder, and that run's agent would write there.
 *
 * Once a run holds its folder's key, it also marks every folder around it as "a folder inside is in use" (a key per
 * enclosing folder, shared by any number of runs: `workspace.dir.inside:<folder>`). It goes on only when no other
 * running run holds the key of a folder around its own (`workspace.dir:<ancestor>`) nor the mark of its own folder
 * (a run inside it). The check and the marks are made while holding one short-lived key (`workspace.dir.nesting`,
 * with a time limit), so two runs never both pass: whichever passes second sees the first one's key or marks.
 *
 * Runs that share a folder (`workspace.shared: true`) take no key of their own for it: under the nesting key each
 * checks that no other running run holds (or waits for) the folder's own key, then joins the folder's shared key
 * (`workspace.dir.shared:<folder>`, any number of runs). A run with the folder to itself, holding the folder's own key,
 * checks under the nesting key that no running run holds the shared key. Both checks and takes are made under the one
 * nesting key, so a shared run and a run of its own are never both in the folder; the one of its own holds its key
 * while it waits, so shared runs arriving later queue behind it rather than starve it.
 *
 * Deadlock-free: a run that has passed never waits again (its later stages find their marks and go on), and a run
 * that waits here holds only its own folder's key, waiting for a run that has passed or for a run in a folder around
 * its own, so every chain of waits climbs towards the root and ends. Marks and keys of runs that have ended are given
 * back by whoever finds them, as the folder's own key is.
 */

/*
 * The marks and the nesting key are kept per task queue: a lease workflow runs on the task queue of whoever asked first,
 * and these keys are shared by every lent folder below one folder (`/`, `/tmp`), so a key shared by two task queues
 * would hang every run of one queue once the other's workers are gone. One deployment serves one task queue.
 */
/** Prefix of the marks: `workspace.dir.inside@Q:/srv/work` is held by every run of queue Q in a folder below `/srv/work`. */
const INSIDE_PREFIX = 'workspace.dir.inside';
/** The key held while a run checks for nesting and takes its marks; held for seconds, with a time limit. */
const NESTING_KEY = 'workspace.dir.nesting';
/** A mark is shared: any number of runs may use folders inside one folder. */
const MARK_LIMIT = 1_000_000;
/** How long the nesting key outlives a worker that died holding it. @unit milliseconds */
const NESTING_TTL_MS = 30_000;
/** Runs looked at, per mark taken, to give back the marks of runs that ended. */
const PRUNE_PER_MARK = 10;

/** The key that marks `folder` as having a lent folder of a run of `taskQueue` inside it. */
export function insideKey(taskQueue: string, folder: string): string {
  return folderKey(`${INSIDE_PREFIX}@${taskQueue}:`, folder);
}

/** The folders around `realFolder`, from the root down (`/srv/work/a` → `/`, `/srv`, `/srv/work`). */
export function enclosingFolders(realFolder: string): string[] {
  const chain: string[] = [];
  for (let dir = path.dirname(realFolder), below = realFolder; dir !== below; below = dir, dir = path.dirname(dir)) chain.unshift(dir);
  return chain;
}

export interface FolderNestingOptions {
  client: Client;
  taskQueue: string;
  /** The run's workflow id. */
  workflowId: string;
  /** The run, as it holds its folder's key (`runHolder`). */
  holder: string;
  /** Unique to this attempt: who holds the nesting key while it checks. */
  attemptHolder: string;
  /** The run shares the folder with other runs that say so (`workspace.shared: true`). */
  shared?: boolean;
  label: string;
  signal?: AbortSignal;
  onWait?: (wait: FolderWait) => void;
  /** @unit milliseconds @default 2000 */
  pollMs?: number;
}

/**
 * Waits until no other running run holds a folder around `realFolder` or inside it, then marks the folders around it
 * for the rest of the run. Call it once the run holds `realFolder`'s own key. @throws the signal's reason when cancelled
 */
export async function claimFolderNesting(realFolder: string, options: FolderNestingOptions): Promise<void> {
  const leases = new LeaseClient(options.client, options.taskQueue);
  const around = enclosingFolders(realFolder);
  // An earlier stage passed: the last key taken (the shared key, else the mark of the nearest folder around) is the run's.
  const lastKey = options.shared ? sharedFolderKey(realFolder) : around.length > 0 ? insideKey(options.taskQueue, around[around.length - 1]) : undefined;
  if (lastKey && (await leases.describe(lastKey))?.holders.some((h) => h.holder === options.holder)) return;
  const nesting = { key: `${NESTING_KEY}@${options.taskQueue}`, limit: 1, holder: options.attemptHolder, ttlMs: NESTING_TTL_MS, label: options.label };
  for (;;) {
    const blocked = await holdLeases(leases, [nesting], () => markIfFree(leases, realFolder, around, options), {
      signal: options.signal,
      // Held for a moment by each run that checks; a worker that died holding it lets go within its time limit.
      onWait: (wait) => options.onWait?.({ ...wait, heldBy: [] }),
    });
    if (!blocked) return;
    options.onWait?.(blocked);
    await sleep(options.pollMs ?? 2_000, undefined, { signal: options.signal });
  }
}

/** Under the nesting key: what blocks the run, or nothing once its marks are taken. */
async function markIfFree(leases: LeaseClient, realFolder: string, around: string[], options: FolderNestingOptions): Promise<FolderWait | undefined> {
  // A run in a folder around this one holds that folder's key (or its shared key); a run in a folder inside this one
  // holds its mark; a run with this folder to itself holds its key, and runs sharing it the shared key.
  const ownKey = options.shared ? folderLeaseKey(realFolder) : sharedFolderKey(realFolder);
  const blockers = [...around.flatMap((folder) => [folderLeaseKey(folder), sharedFolderKey(folder)]), insideKey(options.taskQueue, realFolder), ownKey];
  for (const key of blockers) {
    const heldBy = await releaseEndedHolders(leases, options.client, key, options.holder);
    if (heldBy.length > 0) return { key, ahead: 0, holders: heldBy.length, limit: 1, heldBy };
  }
  for (const folder of around) {
    const key = insideKey(options.taskQueue, folder);
    // Marks are given back only when found: look at a few holders of each mark taken, so marks never pile up.
    await releaseEndedHolders(leases, options.client, key, options.holder, PRUNE_PER_MARK);
    await leases.acquire({ key, limit: MARK_LIMIT, holder: options.holder, label: options.label, run: options.workflowId }, { signal: options.signal });
  }
  if (options.shared) {
    const key = sharedFolderKey(realFolder);
    await releaseEndedHolders(leases, options.client, key, options.holder, PRUNE_PER_MARK);
    await leases.acquire({ key, limit: MARK_LIMIT, holder: options.holder, label: options.label, run: options.workflowId }, { signal: options.signal });
  }
  return undefined;
}
