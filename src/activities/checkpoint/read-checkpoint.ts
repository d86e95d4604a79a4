import { mkdir, realpath, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { RunRef } from '../../pipeline/run-state.js';
import type { ObjectStore } from '../../store/object-store.js';
import { stageFailure } from '../failures.js';
import { extractArchive } from './folder-archive.js';
import { checkpointKey } from './keys.js';
import { newestCheckpointId } from './latest.js';
import { CHECKPOINT_OBJECTS, describeFile, readCheckpointManifest, type CheckpointManifest } from './manifest.js';
import type { CheckpointOptions } from './settings.js';

/*
 * A checkpoint read from the store: its manifest, its objects downloaded and checked against it, its archives unpacked
 * aside. What a restore (restore-checkpoint.ts), a fork and a client reading a lost host's transcripts share.
 */

/** The run whose checkpoints are read, and the stage reading them (in failure messages). */
export interface StoredRunPlace extends RunRef {
  stageId: string;
}

/** The manifest of checkpoint `id`. @throws WORKSPACE_ERROR when it is not a manifest of this run */
export async function readManifest(options: Pick<CheckpointOptions, 'store'>, place: StoredRunPlace, id: string): Promise<CheckpointManifest> {
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
 * The manifest of the run's newest checkpoint when a run can go on from it (it holds the bookkeeping: not a fork
 * point); undefined when there is none, or it cannot be read.
 */
export async function newestRunCheckpoint(store: ObjectStore, run: RunRef): Promise<CheckpointManifest | undefined> {
  const id = await newestCheckpointId(store, run);
  const manifest = id === undefined ? undefined : await readCheckpointManifest(store, run, id);
  return manifest?.objects[CHECKPOINT_OBJECTS.bookkeeping] ? manifest : undefined;
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

/** A checkpoint that cannot be restored (or read): `what` is wrong with it. */
export function damaged(place: StoredRunPlace, manifest: CheckpointManifest, what: string, hint?: string) {
  return stageFailure({
    type: 'WORKSPACE_ERROR',
    stageId: place.stageId,
    nonRetryable: true,
    message: `checkpoint ${manifest.id} of run ${place.runId} (taken ${manifest.takenAt}) cannot be restored: ${what}; nothing was restored`,
    hint: hint ?? 'the store was changed or damaged; delete that checkpoint folder from the store to fall back to the one before, or start a new run',
    details: { checkpoint: manifest.id },
  });
}

/** Unpacks `archive` into a new folder `name` in `scratch`, and returns that folder. */
export async function unpackAside(archive: string, scratch: string, name: string): Promise<string> {
  const unpacked = path.join(scratch, name);
  await mkdir(unpacked);
  await extractArchive(archive, unpacked);
  return unpacked;
}

/** Moves the folder `unpacked` to `target`, which must not exist, in one rename: readers see all of it or none. */
export async function moveIntoPlace(unpacked: string, target: string): Promise<void> {
  await mkdir(path.dirname(target), { recursive: true });
  await rename(unpacked, target);
}

/** Unpacks `archive` beside the folder `target` is to be, then moves it into place in one rename. */
export async function unpackInto(archive: string | undefined, scratch: string, target: string): Promise<void> {
  if (archive) await moveIntoPlace(await unpackAside(archive, scratch, `unpacked-${path.basename(target)}`), target);
}

/**
 * The bookkeeping of checkpoint `manifest`, whose own archive is `archive` (downloaded and checked), unpacked into a new
 * folder in `scratch`, which is returned: the archives of the checkpoints it chains to (bookkeeping-delta.ts), oldest
 * first, each downloaded and checked against its manifest, then its own, each followed by deleting the paths removed
 * since the one before. @throws WORKSPACE_ERROR naming the object missing or damaged
 */
export async function unpackBookkeepingAside(options: Pick<CheckpointOptions, 'store'>, place: StoredRunPlace, manifest: CheckpointManifest, archive: string, scratch: string): Promise<string> {
  const steps: { archive: string; removed: readonly string[] }[] = [];
  for (const id of manifest.bookkeepingChain ?? []) {
    const link = await readManifest(options, place, id);
    const folder = path.join(scratch, `chain-${steps.length}`);
    await mkdir(folder);
    const files = await downloadVerified(options, place, link, folder, [CHECKPOINT_OBJECTS.bookkeeping]);
    steps.push({ archive: files[CHECKPOINT_OBJECTS.bookkeeping]!, removed: link.bookkeepingRemoved ?? [] });
  }
  steps.push({ archive, removed: manifest.bookkeepingRemoved ?? [] });
  const unpacked = path.join(scratch, 'unpacked-bookkeeping');
  await mkdir(unpacked);
  const root = await realpath(unpacked);
  for (const step of steps) {
    await extractArchive(step.archive, unpacked);
    for (const removed of step.removed) await removeInside(root, removed);
  }
  return unpacked;
}

/**
 * The bookkeeping of checkpoint `manifest` ({@link unpackBookkeepingAside}) moved to `target`, a folder that does not
 * exist yet: what a client reads a lost host's transcripts from. @throws WORKSPACE_ERROR naming the object missing or damaged
 */
export async function unpackBookkeeping(options: Pick<CheckpointOptions, 'store'>, place: StoredRunPlace, manifest: CheckpointManifest, scratch: string, target: string): Promise<void> {
  const files = await downloadVerified(options, place, manifest, scratch, [CHECKPOINT_OBJECTS.bookkeeping]);
  await moveIntoPlace(await unpackBookkeepingAside(options, place, manifest, files[CHECKPOINT_OBJECTS.bookkeeping]!, scratch), target);
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
