import { existsSync } from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { checkpointsPrefix } from '../../src/activities/checkpoint/keys.js';
import { LATEST_OBJECT } from '../../src/activities/checkpoint/latest.js';
import { descendantsOf } from '../../src/activities/process/proc.js';
import { stopGracefully } from '../../src/activities/process/stop.js';
import type { Harness } from '../helpers/harness.js';
import type { WorkerProcess } from './fault-helpers.js';

/* What the machine-loss tests (checkpoint-machine-loss*.test.ts) share: the store's manifests, and losing a host. */

/** A checkpoint manifest as the tests read it. */
export interface SeenManifest {
  id: string;
  runId: string;
  reason: string;
  takenAt: string;
}

/** The checkpoint manifests of run `runId` in the harness's default (folder) store, oldest first. */
export async function storeManifests(harness: Harness, runId: string): Promise<SeenManifest[]> {
  const storeDir = path.join(harness.workspacesRoot, '.agent-pipeline', 'store');
  const files = existsSync(storeDir) ? await readdir(storeDir, { recursive: true }) : [];
  const read = files.filter((f) => f.endsWith('manifest.json')).map(async (f) => JSON.parse(await readFile(path.join(storeDir, f), 'utf8')) as SeenManifest);
  return (await Promise.all(read)).filter((m) => m.runId === runId).sort((a, b) => a.id.localeCompare(b.id));
}

/**
 * The checkpoint another host would restore `runId` from: the one the run's index (`checkpoints/latest.json`) names.
 * A manifest is written before the index names it, so a host lost between the two restores the one before.
 */
export async function restorableManifest(harness: Harness, runId: string): Promise<SeenManifest | undefined> {
  const storeDir = path.join(harness.workspacesRoot, '.agent-pipeline', 'store');
  const latest = await readFile(path.join(storeDir, checkpointsPrefix(harness.runRef(runId)), LATEST_OBJECT), 'utf8').catch(() => undefined);
  if (latest === undefined) return undefined;
  const { id } = JSON.parse(latest) as { id: string };
  return (await storeManifests(harness, runId)).find((m) => m.id === id);
}

/**
 * The host running `runId` is gone: its worker and agents killed, the run's folder and bookkeeping deleted.
 * @returns how many model requests had been made by then (the later ones are the other host's)
 */
export async function loseHost(harness: Harness, worker: WorkerProcess, runId: string): Promise<number> {
  // Everything on a lost machine stops at once. Killed with its worker, an agent would be stopped by the worker's
  // watchdog, gracefully: Claude Code writes its session files as it exits, into the folders deleted below (ENOTEMPTY
  // on a loaded machine), or after they were deleted.
  const onHost = descendantsOf(worker.pid);
  await worker.crash();
  // No grace: SIGKILL until each is gone or a zombie, as the worker stops a stage's processes past their grace.
  const { survivors } = await stopGracefully(() => onHost, 0);
  if (survivors.length > 0) throw new Error(`processes of the lost host still running after SIGKILL: ${survivors.join(', ')}`);
  const lostAt = harness.modelServer.requests().length;
  await rm(harness.runDir(runId), { recursive: true, force: true });
  await rm(harness.runBookkeeping(runId), { recursive: true, force: true });
  return lostAt;
}
