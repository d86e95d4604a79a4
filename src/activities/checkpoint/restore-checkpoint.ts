import { existsSync } from 'node:fs';
import { mkdir, rename } from 'node:fs/promises';
import path from 'node:path';
import type { RunRef } from '../../pipeline/run-state.js';
import { stageFailure } from '../failures.js';
import { runPaths, RUN_RECORD, type RunPaths } from '../workspace/run-folder.js';
import { bundleProblem, unbundleInto } from './git-snapshot.js';
import { newestCheckpointId } from './latest.js';
import { CHECKPOINT_OBJECTS, type CheckpointManifest } from './manifest.js';
import { readCheckpointMarker, readRestoreRecord, writeCheckpointMarker, writeRestoreRecord, type RestoreRecord } from './marker.js';
import { damaged, downloadVerified, moveIntoPlace, newestRunCheckpoint, readManifest, unpackAside, unpackBookkeepingAside } from './read-checkpoint.js';
import { withScratch } from './scratch.js';
import { WORKSPACES_VARIABLE_NAME, type CheckpointOptions } from './settings.js';

/** Where an attempt is about to run, as the restore needs it. */
export interface RestorePlace extends RunRef {
  workspacesRoot: string;
  kind: CheckpointManifest['kind'];
  /** With `kind: git`: the repository (`workspace.repo`, resolved). */
  repo?: string;
  /** With `kind: git`: the run's branch, as this attempt renders it; a checkpoint naming another is refused. */
  branch?: string;
  stageId: string;
}

/** A restore done: what the attempt tells its agent, and for a worktree the commit to lay out once it is opened. */
export interface Restored {
  manifest: CheckpointManifest;
  warnings: string[];
}

/**
 * Restores the run's workspace and bookkeeping from its newest checkpoint when this host has none of them, or an
 * older copy than that checkpoint; does nothing otherwise. Every object is downloaded, checked against the manifest and
 * unpacked aside before anything changes, and each folder is moved into place whole.
 *
 * A worker may be killed at any point of it (SIGKILL, a lost machine): the host's copy is changed in an order that
 * leaves the next attempt either nothing restored or the restore whole and marked, never a copy it takes for current
 * whose agent is not told, or that no later checkpoint could be found newer than. The bookkeeping, with the checkpoint
 * marker and the restore record written into it, moves into place last, so a bookkeeping folder a restore put here
 * always says which checkpoint it came from, and a host without one (a workspace alone may be one a killed restore
 * left) takes both folders from the checkpoint. When only the workspace is missing, the record is written before it
 * comes. A worktree's uncommitted work is laid out after the restore ({@link finishRestore} in stage-checkpoints.ts):
 * the record names it until then.
 * @throws CONFIG_INVALID (not retried) when this worker's paths differ from those the checkpoint was taken under
 * @throws WORKSPACE_ERROR (not retried) when the checkpoint is damaged or its base commit is missing here
 */
export async function restoreIfNeeded(options: CheckpointOptions, place: RestorePlace): Promise<Restored | undefined> {
  const latest = await newestCheckpointId(options.store, place);
  if (!latest) return undefined;
  const paths = runPaths(place.workspacesRoot, place);
  const restore = await whatToRestore(place, paths, latest);
  if (!restore) return undefined;
  const manifest = await readManifest(options, place, latest);
  // A fork point (a stage's first start, taken without its bookkeeping) is not something a run goes on from.
  if (!manifest.objects[CHECKPOINT_OBJECTS.bookkeeping]) return undefined;
  refuseOtherPaths(manifest, place, paths.dir);
  return withScratch(place.workspacesRoot, async (scratch) => {
    const files = await downloadVerified(options, place, manifest, scratch);
    await refuseUnusable(place, manifest, files);
    const archive = files[CHECKPOINT_OBJECTS.folderArchive];
    const workspace = archive === undefined ? undefined : await unpackAside(archive, scratch, 'unpacked-workspace');
    const bookkeeping = restore === 'both' ? await unpackBookkeepingAside(options, place, manifest, files[CHECKPOINT_OBJECTS.bookkeeping]!, scratch) : paths.bookkeeping;
    // Everything is checked and unpacked: from here on, the host's copy changes. The marker and the record go into the
    // unpacked bookkeeping, which moves into place last; with the workspace alone missing, here before it comes.
    await markRestored(bookkeeping, manifest, { id: manifest.id, takenAt: manifest.takenAt, stages: [place.stageId], ...(manifest.git ? { work: manifest.git.work } : {}) });
    if (restore === 'both') await moveAside(scratch, [paths.dir, paths.bookkeeping]);
    if (workspace) await moveIntoPlace(workspace, paths.dir);
    const warning = manifest.git ? await unbundleInto(place.repo!, files[CHECKPOINT_OBJECTS.gitBundle]!, manifest.git) : undefined;
    if (restore === 'both') await moveIntoPlace(bookkeeping, paths.bookkeeping);
    return { manifest, warnings: warning ? [warning] : [] };
  });
}

/**
 * What this host lacks of the run, against the store's newest checkpoint `latest`: `both` folders (it has no
 * bookkeeping of the run, or an older copy), the `workspace` alone, or nothing (undefined).
 */
async function whatToRestore(place: RestorePlace, paths: RunPaths, latest: string): Promise<'both' | 'workspace' | undefined> {
  const marker = await readCheckpointMarker(paths.bookkeeping);
  // Without its bookkeeping, a workspace here may be one a killed restore left: nothing says of which checkpoint.
  if (!existsSync(path.join(paths.bookkeeping, RUN_RECORD)) || (marker !== undefined && marker.id < latest)) return 'both';
  if (place.kind === 'folder') return existsSync(paths.dir) ? undefined : 'workspace';
  if (place.kind !== 'git') return undefined;
  // A worktree a killed attempt opened but had not laid the work out in yet is at its branch's tip: restored again.
  const workPending = (await readRestoreRecord(paths.bookkeeping))?.work !== undefined;
  return existsSync(path.join(paths.dir, '.git')) && !workPending ? undefined : 'workspace';
}

/** Refuses a checkpoint whose git bundle names another branch than the run's, or cannot be used in the repository. */
async function refuseUnusable(place: RestorePlace, manifest: CheckpointManifest, files: Record<string, string>): Promise<void> {
  if (!manifest.git) return;
  // A manifest naming another branch would have the restore create or move that branch: never.
  if (manifest.git.branch !== place.branch) throw damaged(place, manifest, `it names the branch ${manifest.git.branch}, but the run's branch is ${place.branch ?? '(none)'}`);
  const problem = await bundleProblem(place.repo!, files[CHECKPOINT_OBJECTS.gitBundle]!);
  if (problem) throw damaged(place, manifest, `its git bundle cannot be used in ${place.repo}: ${problem}`, `the repository needs the commit ${manifest.git.base} the run started from: fetch it into ${place.repo}, then retry`);
}

/** Records in `bookkeeping` which checkpoint the host's copy is now, and the restore its stages are to be told of. */
async function markRestored(bookkeeping: string, manifest: CheckpointManifest, record: RestoreRecord): Promise<void> {
  // The stage restoring is the first to have an attempt on the restored copy (marker.ts: the others are told later).
  await writeRestoreRecord(bookkeeping, record);
  await writeCheckpointMarker(bookkeeping, manifest);
}

/**
 * The run folder of the run's newest checkpoint (one a run goes on from), when it is not where this worker would put
 * the run: such a worker could not go on with the run ({@link refuseOtherPaths}), and declines to own it.
 */
export async function checkpointElsewhere(options: CheckpointOptions, workspacesRoot: string, run: RunRef): Promise<string | undefined> {
  const manifest = await newestRunCheckpoint(options.store, run);
  if (!manifest) return undefined;
  return manifest.runDir === runPaths(workspacesRoot, run).dir ? undefined : manifest.runDir;
}

/** Claude Code keys its sessions by the working directory's path: a run can only go on where that path is the same. */
function refuseOtherPaths(manifest: CheckpointManifest, place: RestorePlace, runDir: string): void {
  const mismatch =
    manifest.runDir !== runDir
      ? { what: 'run folder', theirs: manifest.runDir, ours: runDir, fix: `set ${WORKSPACES_VARIABLE_NAME}=${path.dirname(manifest.runDir)} on this worker, as on the worker that took it` }
      : manifest.git && manifest.git.repo !== place.repo
        ? { what: 'workspace.repo', theirs: manifest.git.repo, ours: place.repo ?? '(none)', fix: `keep the repository at ${manifest.git.repo} on every worker of the task queue` }
        : undefined;
  if (!mismatch) return;
  throw stageFailure({
    type: 'CONFIG_INVALID',
    stageId: place.stageId,
    nonRetryable: true,
    message: `the run's checkpoint ${manifest.id} was taken with the ${mismatch.what} at ${mismatch.theirs}, but on this worker it is ${mismatch.ours}; Claude Code finds a session by its working directory's path, so the run cannot go on here`,
    hint: mismatch.fix,
    details: { checkpoint: manifest.id, recorded: mismatch.theirs, here: mismatch.ours },
  });
}

/**
 * Moves what this host has of the run (an older copy, or a workspace a killed restore left) into `scratch` (removed
 * with it), so the restored folders take their places.
 */
async function moveAside(scratch: string, folders: string[]): Promise<void> {
  const aside = path.join(scratch, 'older');
  await mkdir(aside);
  for (const [i, folder] of folders.entries()) if (existsSync(folder)) await rename(folder, path.join(aside, String(i)));
}

