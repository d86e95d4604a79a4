import { existsSync } from 'node:fs';
import { mkdir, realpath, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { RunRef } from '../../pipeline/run-state.js';
import type { ObjectStore } from '../../store/object-store.js';
import { stageFailure } from '../failures.js';
import { runPaths } from '../workspace/run-folder.js';
import { extractArchive } from './folder-archive.js';
import { bundleProblem, unbundleInto } from './git-snapshot.js';
import { checkpointKey } from './keys.js';
import { newestCheckpointId } from './latest.js';
import { CHECKPOINT_OBJECTS, describeFile, readCheckpointManifest, type CheckpointManifest } from './manifest.js';
import { readCheckpointMarker, writeCheckpointMarker, writeRestoreRecord } from './marker.js';
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

/** The run whose checkpoints are read, and the stage reading them (in failure messages). */
export type StoredRunPlace = RunRef & Pick<RestorePlace, 'stageId'>;

/** A restore done: what the attempt tells its agent, and for a worktree the commit to lay out once it is opened. */
export interface Restored {
  manifest: CheckpointManifest;
  warnings: string[];
}

/**
 * Restores the run's workspace and bookkeeping from its newest checkpoint when this host has none of them, or an
 * older copy than that checkpoint; does nothing otherwise. Every object is checked against the manifest before
 * anything changes, and each folder is unpacked aside and moved into place whole.
 * @throws CONFIG_INVALID (not retried) when this worker's paths differ from those the checkpoint was taken under
 * @throws WORKSPACE_ERROR (not retried) when the checkpoint is damaged or its base commit is missing here
 */
export async function restoreIfNeeded(options: CheckpointOptions, place: RestorePlace): Promise<Restored | undefined> {
  const latest = await newestCheckpointId(options.store, place);
  if (!latest) return undefined;
  const paths = runPaths(place.workspacesRoot, place);
  const marker = await readCheckpointMarker(paths.bookkeeping);
  const workspaceMissing = place.kind === 'git' ? !existsSync(path.join(paths.dir, '.git')) : place.kind === 'folder' && !existsSync(paths.dir);
  const bookkeepingMissing = !existsSync(path.join(paths.bookkeeping, 'run.json'));
  const stale = marker !== undefined && marker.id < latest;
  if (!workspaceMissing && !bookkeepingMissing && !stale) return undefined;
  const manifest = await readManifest(options, place, latest);
  // A fork point (a stage's first start, taken without its bookkeeping) is not something a run goes on from.
  if (!manifest.objects[CHECKPOINT_OBJECTS.bookkeeping]) return undefined;
  refuseOtherPaths(manifest, place, paths.dir);
  return withScratch(place.workspacesRoot, async (scratch) => {
    const files = await downloadVerified(options, place, manifest, scratch);
    const warnings: string[] = [];
    if (manifest.git && manifest.git.branch !== place.branch) {
      // A manifest naming another branch would have the restore create or move that branch: never.
      throw damaged(place, manifest, `it names the branch ${manifest.git.branch}, but the run's branch is ${place.branch ?? '(none)'}`);
    }
    if (manifest.git) {
      const problem = await bundleProblem(place.repo!, files[CHECKPOINT_OBJECTS.gitBundle]);
      if (problem) throw damaged(place, manifest, `its git bundle cannot be used in ${place.repo}: ${problem}`, `the repository needs the commit ${manifest.git.base} the run started from: fetch it into ${place.repo}, then retry`);
    }
    const bookkeeping = bookkeepingMissing || stale ? await bookkeepingSteps(options, place, manifest, files[CHECKPOINT_OBJECTS.bookkeeping]!, scratch) : [];
    // Everything is checked: from here on, the host's copy is replaced.
    if (stale) await moveAside(scratch, [paths.dir, paths.bookkeeping]);
    if (bookkeeping.length > 0) await unpackSteps(bookkeeping, scratch, paths.bookkeeping);
    if (manifest.kind === 'folder' && (workspaceMissing || stale)) await unpackInto(files[CHECKPOINT_OBJECTS.folderArchive], scratch, paths.dir);
    if (manifest.git && (workspaceMissing || stale)) {
      const warning = await unbundleInto(place.repo!, files[CHECKPOINT_OBJECTS.gitBundle], manifest.git);
      if (warning) warnings.push(warning);
    }
    // The stage restoring is the first to have an attempt on the restored copy (marker.ts: the others are told later).
    await writeRestoreRecord(paths.bookkeeping, { id: manifest.id, takenAt: manifest.takenAt, stages: [place.stageId] });
    await writeCheckpointMarker(paths.bookkeeping, manifest);
    return { manifest, warnings };
  });
}

async function readManifest(options: Pick<CheckpointOptions, 'store'>, place: StoredRunPlace, id: string): Promise<CheckpointManifest> {
  const manifest = await readCheckpointManifest(options.store, place, id);
  if (!manifest) {
    throw stageFailure({
      type: 'WORKSPACE_ERROR',
      stageId: place.stageId,
      nonRetryable: true,
      message: `the manifest of checkpoint ${id} of run ${place.runId} in ${options.store.description} is not a checkpoint manifest of this run`,
      hint: 'the store was changed by hand; delete that checkpoint folder from the store to fall back to the one before, or start a new run',
    });
  }
  return manifest;
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

/**
 * The manifest of the run's newest checkpoint when a run can go on from it (it holds the bookkeeping: not a fork
 * point); undefined when there is none, or it cannot be read.
 */
export async function newestRunCheckpoint(store: ObjectStore, run: RunRef): Promise<CheckpointManifest | undefined> {
  const id = await newestCheckpointId(store, run);
  const manifest = id === undefined ? undefined : await readCheckpointManifest(store, run, id);
  return manifest?.objects[CHECKPOINT_OBJECTS.bookkeeping] ? manifest : undefined;
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

/** The object holding a checkpoint's workspace: its git bundle, its folder's archive, or none for a lent folder. */
export function workspaceObjects(manifest: CheckpointManifest): string[] {
  return manifest.kind === 'git' ? [CHECKPOINT_OBJECTS.gitBundle] : manifest.kind === 'folder' ? [CHECKPOINT_OBJECTS.folderArchive] : [];
}

/**
 * Downloads the objects `names` of the manifest (all it holds of a whole checkpoint by default) into `scratch` and
 * checks their size and sha256. @throws WORKSPACE_ERROR naming the object missing or damaged
 */
export async function downloadVerified(
  options: Pick<CheckpointOptions, 'store'>,
  place: StoredRunPlace,
  manifest: CheckpointManifest,
  scratch: string,
  names = [CHECKPOINT_OBJECTS.bookkeeping, ...workspaceObjects(manifest)],
): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const name of names) {
    const want = manifest.objects[name];
    const file = path.join(scratch, name);
    if (!want || !(await options.store.getFile(checkpointKey(place, manifest.id, name), file, Math.max(want.bytes, 0) + 1))) {
      throw damaged(place, manifest, `its object ${name} is missing`);
    }
    const got = await describeFile(file);
    if (got.sha256 !== want.sha256 || got.bytes !== want.bytes) {
      throw damaged(place, manifest, `its object ${name} has sha256 ${got.sha256} (${got.bytes} bytes), but the manifest says ${want.sha256} (${want.bytes} bytes)`);
    }
    files[name] = file;
  }
  return files;
}

function damaged(place: StoredRunPlace, manifest: CheckpointManifest, what: string, hint?: string) {
  return stageFailure({
    type: 'WORKSPACE_ERROR',
    stageId: place.stageId,
    nonRetryable: true,
    message: `checkpoint ${manifest.id} of run ${place.runId} (taken ${manifest.takenAt}) cannot be restored: ${what}; nothing was restored`,
    hint: hint ?? 'the store was changed or damaged; delete that checkpoint folder from the store to fall back to the one before, or start a new run',
    details: { checkpoint: manifest.id },
  });
}

/** Unpacks `archive` beside the folder `target` is to be, then moves it into place in one rename. */
export async function unpackInto(archive: string | undefined, scratch: string, target: string): Promise<void> {
  if (!archive) return;
  const unpacked = path.join(scratch, `unpacked-${path.basename(target)}`);
  await mkdir(unpacked);
  await extractArchive(archive, unpacked);
  await mkdir(path.dirname(target), { recursive: true });
  await rename(unpacked, target);
}

/** One archive of a bookkeeping chain: unpacked over the ones before it, then the paths removed since them deleted. */
interface ArchiveStep {
  archive: string;
  removed: readonly string[];
}

/**
 * The archives that make up the checkpoint's bookkeeping, oldest first: those of the checkpoints it chains to
 * (bookkeeping-delta.ts), each checked against its manifest, then its own `archive`.
 */
async function bookkeepingSteps(options: Pick<CheckpointOptions, 'store'>, place: StoredRunPlace, manifest: CheckpointManifest, archive: string, scratch: string): Promise<ArchiveStep[]> {
  const steps: ArchiveStep[] = [];
  for (const id of manifest.bookkeepingChain ?? []) {
    const link = await readManifest(options, place, id);
    const folder = path.join(scratch, `chain-${steps.length}`);
    await mkdir(folder);
    const files = await downloadVerified(options, place, link, folder, [CHECKPOINT_OBJECTS.bookkeeping]);
    steps.push({ archive: files[CHECKPOINT_OBJECTS.bookkeeping]!, removed: link.bookkeepingRemoved ?? [] });
  }
  return [...steps, { archive, removed: manifest.bookkeepingRemoved ?? [] }];
}

/**
 * The bookkeeping of checkpoint `manifest` (its chain's archives, then its own), each checked against its manifest,
 * unpacked into `target`, a folder that does not exist yet: what a client reads a lost host's transcripts from.
 * @throws WORKSPACE_ERROR naming the object missing or damaged
 */
export async function unpackBookkeeping(options: Pick<CheckpointOptions, 'store'>, place: StoredRunPlace, manifest: CheckpointManifest, scratch: string, target: string): Promise<void> {
  const files = await downloadVerified(options, place, manifest, scratch, [CHECKPOINT_OBJECTS.bookkeeping]);
  await unpackSteps(await bookkeepingSteps(options, place, manifest, files[CHECKPOINT_OBJECTS.bookkeeping]!, scratch), scratch, target);
}

/** Unpacks `steps` in order into a folder beside `target`, then moves it into place in one rename. */
async function unpackSteps(steps: ArchiveStep[], scratch: string, target: string): Promise<void> {
  const unpacked = path.join(scratch, `unpacked-${path.basename(target)}`);
  await mkdir(unpacked);
  const root = await realpath(unpacked);
  for (const step of steps) {
    await extractArchive(step.archive, unpacked);
    for (const removed of step.removed) await removeInside(root, removed);
  }
  await mkdir(path.dirname(target), { recursive: true });
  await rename(unpacked, target);
}

/** Deletes `relative` (a `./` path a listing gave) inside `root`, never through a link out of it. */
async function removeInside(root: string, relative: string): Promise<void> {
  const parts = relative.split('/');
  if (parts[0] !== '.' || parts.length < 2 || parts.some((part, i) => i > 0 && (part === '' || part === '.' || part === '..'))) return;
  const file = path.join(root, ...parts.slice(1));
  const parent = await realpath(path.dirname(file)).catch(() => undefined);
  if (parent === undefined || (parent !== root && !parent.startsWith(`${root}${path.sep}`))) return;
  await rm(file, { recursive: true, force: true });
}

/** Moves this host's older copies into `scratch` (removed with it), so the restored folders take their places. */
async function moveAside(scratch: string, folders: string[]): Promise<void> {
  const aside = path.join(scratch, 'older');
  await mkdir(aside);
  for (const [i, folder] of folders.entries()) if (existsSync(folder)) await rename(folder, path.join(aside, String(i)));
}

