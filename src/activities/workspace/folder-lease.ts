import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { createHash } from 'node:crypto';
import { LeaseClient, type LeaseWait } from '../leases/lease-client.js';
import { MAX_LEASE_KEY_LENGTH } from '../../contracts/lease-messages.js';

/*
 * One run at a time in a lent folder (`workspace.dir`). The folder's key (a hash of its real path) is a lease of
 * limit 1 held by the run, not by a stage attempt: every stage of the run asks for it again under the same holder,
 * so a run's parallel stages share it, and runs never interleave in the folder. It is held for the run's life, with
 * no time limit, so a run waiting for a person keeps its folder. Nobody has to give it back on every path: a run that
 * waits for the key checks, on each poll, whether the runs holding it are still running, and releases the key of a
 * run that has ended however it ended (completed, failed, cancelled, terminated, timed out, or its worker gone), so
 * a crash never leaves a folder locked. A folder inside or around one another run holds waits too (folder-nesting.ts).
 */

const KEY_PREFIX = 'workspace.dir:';
/** Held by every run in the folder that says `workspace.shared: true`, at once (folder-nesting.ts takes it). */
const SHARED_PREFIX = 'workspace.dir.shared:';

/**
 * The lease key of a lent folder: its real path, so that `status` and `limits` say which folder a run waits for; a
 * path too long for a key (or with control characters) is hashed.
 */
export function folderLeaseKey(realFolder: string): string {
  return folderKey(KEY_PREFIX, realFolder);
}

/** The key the runs that share a lent folder (`workspace.shared: true`) hold together. */
export function sharedFolderKey(realFolder: string): string {
  return folderKey(SHARED_PREFIX, realFolder);
}

/** A key naming a folder after `prefix`: the path itself when it fits, else its hash. */
export function folderKey(prefix: string, realFolder: string): string {
  if (prefix.length + realFolder.length <= MAX_LEASE_KEY_LENGTH && !/[\u0000-\u001f\u007f]/.test(realFolder)) return prefix + realFolder;
  return `${prefix}sha256:${createHash('sha256').update(realFolder).digest('hex').slice(0, 32)}`;
}

/** The holder a run's stages ask as: its workflow id, which a continued-as-new run keeps. */
export function runHolder(workflowId: string): string {
  return `run:${workflowId}`;
}

/** What a stage waiting for the folder is told, on each poll. */
export interface FolderWait extends LeaseWait {
  /** The runs holding the folder (their workflow ids). */
  heldBy: string[];
}

export interface HoldFolderOptions {
  client: Client;
  /** Where the lease workflows run: the worker's task queue. */
  taskQueue: string;
  /** The run's workflow id. */
  workflowId: string;
  /** Shown by `agent-pipeline limits` for the holder. */
  label: string;
  signal?: AbortSignal;
  onWait?: (wait: FolderWait) => void;
  /** @unit milliseconds @default 2000 */
  pollMs?: number;
}

/**
 * Takes (or takes again: idempotent for the same run) the lease of `realFolder`, waiting first come first served
 * while another run holds it. @throws the signal's reason when cancelled while waiting
 */
export async function holdLentFolder(realFolder: string, options: HoldFolderOptions): Promise<void> {
  const leases = new LeaseClient(options.client, options.taskQueue);
  const key = folderLeaseKey(realFolder);
  const holder = runHolder(options.workflowId);
  let checking = false;
  await leases.acquire(
    // Held for the run's life: the run is named, so the key's workflow checks it runs and takes the key back if it ends.
    { key, limit: 1, holder, label: `${options.label} in ${realFolder}`.slice(0, 500), run: options.workflowId },
    {
      signal: options.signal,
      pollMs: options.pollMs ?? 2_000,
      onWait: (wait) => {
        if (checking) return;
        checking = true;
        void releaseEndedHolders(leases, options.client, key, holder)
          .then((heldBy) => options.onWait?.({ ...wait, heldBy }))
          .catch(() => options.onWait?.({ ...wait, heldBy: [] }))
          .finally(() => (checking = false));
      },
    },
  );
}

/**
 * Releases the key of the holders whose run has ended; returns those still holding it: the workflow ids of runs still
 * running, and any holder that is not a run as it is (it cannot be checked, so it counts as holding). With `max`, only
 * that many holders, picked at random, are looked at (a shared key of many runs is tidied a little at each visit).
 */
export async function releaseEndedHolders(leases: LeaseClient, client: Client, key: string, self: string, max = Infinity): Promise<string[]> {
  const state = await leases.describe(key);
  const others = (state?.holders ?? []).filter((entry) => entry.holder !== self);
  const looked = new Set(Number.isFinite(max) ? [...others].sort(() => Math.random() - 0.5).slice(0, max) : others);
  const holding: string[] = [];
  for (const entry of others) {
    if (!entry.holder.startsWith('run:') || !looked.has(entry)) {
      holding.push(entry.holder);
      continue;
    }
    const workflowId = entry.holder.slice('run:'.length);
    if (await isRunning(client, workflowId)) holding.push(workflowId);
    else await leases.release(key, entry.holder);
  }
  return holding;
}

async function isRunning(client: Client, workflowId: string): Promise<boolean> {
  try {
    return (await client.workflow.getHandle(workflowId).describe()).status.name === 'RUNNING';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    // Anything else (the server busy): assume it still runs, and ask again on the next poll.
    return true;
  }
}
