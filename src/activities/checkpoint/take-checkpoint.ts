import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { RunRef } from '../../pipeline/run-state.js';
import type { RunWorkspace } from '../workspace/run-workspace.js';
import { withLock } from '../workspace/keyed-lock.js';
import { readWorktreeBase } from '../workspace/worktree-base.js';
import { copyBookkeeping, listBookkeeping } from './bookkeeping-copy.js';
import { planBookkeeping, recordArchived } from './bookkeeping-delta.js';
import { ArchiveTooLargeError, createArchive, listFolder } from './folder-archive.js';
import { snapshotWorktree } from './git-snapshot.js';
import { checkpointKey, checkpointsPrefix, listCheckpointEntries, MANIFEST_OBJECT, newCheckpointId, sha256Hex, STAGE_START_OBJECT } from './keys.js';
import { CHECKPOINT_OBJECTS, describeFile, readCheckpointManifest, type CheckpointManifest } from './manifest.js';
import { readLatestCheckpoints, writeLatestCheckpoints, type LatestCheckpoints } from './latest.js';
import { readCheckpointMarker, writeCheckpointMarker } from './marker.js';
import { withScratch } from './scratch.js';
import { CHECKPOINT_MAX_BYTES_VARIABLE, type CheckpointOptions } from './settings.js';

/** What is checkpointed: a run's folder (a worktree, a plain folder, or a lent folder whose files are not ours). */
export interface CheckpointTarget extends RunRef {
  workspacesRoot: string;
  /** The run's workspace (under `isolation: stage`, the run's, not the stage's). */
  workspace: RunWorkspace;
  kind: CheckpointManifest['kind'];
  /** With `kind: git`: the repository (`workspace.repo`, resolved). */
  repo?: string;
}

/** Thrown when a checkpoint would hold more than `AGENT_PIPELINE_CHECKPOINT_MAX_BYTES` allows. */
export class CheckpointTooLargeError extends Error {
  override readonly name = 'CheckpointTooLargeError';
}

/**
 * Writes a checkpoint of the run: its workspace, its bookkeeping, and last the manifest; then forgets the older
 * ones, but the first-start checkpoints of stages (`stage` given), which forks start from. One at a time per run in
 * this process.
 * @throws CheckpointTooLargeError naming the cap and its setting; store and git errors as they come
 */
export async function takeCheckpoint(options: CheckpointOptions, target: CheckpointTarget, reason: string, stage?: string): Promise<CheckpointManifest> {
  return withLock(`checkpoint:${target.runId}`, () =>
    withScratch(target.workspacesRoot, async (scratch) => {
      const id = newCheckpointId();
      const manifest: CheckpointManifest = {
        version: 1,
        runId: target.runId,
        id,
        takenAt: new Date().toISOString(),
        reason,
        runDir: target.workspace.dir,
        kind: target.kind,
        ...(stage === undefined ? {} : { stage }),
        objects: {},
      };
      const afterManifest: (() => Promise<void>)[] = [];
      const files = await writeObjects(options, target, manifest, scratch, afterManifest);
      // Uploaded side by side (a remote store's round trips dominate), recorded in a fixed order.
      const described = await allSettled(
        Object.entries(files).map(async ([name, file]) => {
          const object = await describeFile(file);
          if (object.bytes > options.maxBytes) throw tooLarge(target.runId, name, object.bytes, options.maxBytes);
          await options.store.putFile(checkpointKey(target, id, name), file);
          return [name, object] as const;
        }),
      );
      for (const [name, object] of described) manifest.objects[name] = object;
      if (stage !== undefined) await options.store.put(checkpointKey(target, id, STAGE_START_OBJECT), Buffer.from(sha256Hex(stage)));
      // Last: a checkpoint is complete, and read, only once its manifest is there.
      await options.store.put(checkpointKey(target, id, MANIFEST_OBJECT), Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`));
      await writeCheckpointMarker(target.workspace.bookkeeping, manifest);
      for (const record of afterManifest) await record();
      // Fork points are all first-start checkpoints, each kept: listing the run's checkpoints at every stage start would
      // find nothing to forget, at a cost growing with the run.
      if (!options.forkPointsOnly) await forgetOlder(options, target, manifest);
      return manifest;
    }),
  );
}

/** Writes the checkpoint's objects into `scratch`; returns their files by object name (and fills `manifest.git`). */
async function writeObjects(options: CheckpointOptions, target: CheckpointTarget, manifest: CheckpointManifest, scratch: string, afterManifest: (() => Promise<void>)[]): Promise<Record<string, string>> {
  try {
    // The workspace and the bookkeeping are independent: written side by side, the slower one sets the time.
    const [workspace, bookkeeping] = await allSettled([
      writeWorkspaceObject(options, target, manifest, scratch),
      // A fork point is the workspace alone: a fork reads its source's results from the run, not from its records.
      options.forkPointsOnly ? Promise.resolve({}) : writeBookkeepingObject(options, target, manifest, scratch, afterManifest),
    ]);
    return { ...workspace, ...bookkeeping };
  } catch (err) {
    if (err instanceof ArchiveTooLargeError) throw tooLarge(target.runId, 'files', undefined, options.maxBytes, err.message);
    throw err;
  }
}

/** The git bundle of a worktree (filling `manifest.git`), the archive of a plain folder, or nothing for a lent folder. */
async function writeWorkspaceObject(options: CheckpointOptions, target: CheckpointTarget, manifest: CheckpointManifest, scratch: string): Promise<Record<string, string>> {
  const { workspace } = target;
  if (target.kind === 'git') {
    const base = await readWorktreeBase(workspace.bookkeeping);
    if (!base) throw new Error(`the run's bookkeeping ${workspace.bookkeeping} records no base commit of its worktree`);
    const bundleFile = path.join(scratch, CHECKPOINT_OBJECTS.gitBundle);
    const snapshot = await snapshotWorktree(workspace.dir, { branch: workspace.branch!, base, id: manifest.id, scratch, bundleFile, maxBytes: options.maxBytes });
    manifest.git = { repo: target.repo!, branch: workspace.branch!, base, ...snapshot };
    return { [CHECKPOINT_OBJECTS.gitBundle]: bundleFile };
  }
  if (target.kind === 'folder') {
    const archive = path.join(scratch, CHECKPOINT_OBJECTS.folderArchive);
    await createArchive(workspace.dir, (await listFolder(workspace.dir, { maxBytes: options.maxBytes })).entries, archive);
    return { [CHECKPOINT_OBJECTS.folderArchive]: archive };
  }
  return {};
}

/**
 * The archive of the run's bookkeeping, copied first (see bookkeeping-copy.ts): of what changed since this host's
 * previous checkpoint, chained to it (bookkeeping-delta.ts). Pushes onto `afterManifest` the record of what it archived.
 */
async function writeBookkeepingObject(options: CheckpointOptions, target: CheckpointTarget, manifest: CheckpointManifest, scratch: string, afterManifest: (() => Promise<void>)[]): Promise<Record<string, string>> {
  const { bookkeeping } = target.workspace;
  const listing = await listBookkeeping(bookkeeping, options.maxBytes);
  const delta = await planBookkeeping(bookkeeping, listing, (await readCheckpointMarker(bookkeeping))?.id);
  const copy = path.join(scratch, 'bookkeeping');
  await mkdir(copy);
  const cut = await copyBookkeeping(bookkeeping, copy, listing, delta.entries);
  const archive = path.join(scratch, CHECKPOINT_OBJECTS.bookkeeping);
  await createArchive(copy, delta.entries, archive);
  if (delta.chain.length > 0) Object.assign(manifest, { bookkeepingChain: delta.chain, bookkeepingRemoved: delta.removed });
  afterManifest.push(() => recordArchived(bookkeeping, manifest.id, delta.chain, listing, cut));
  return { [CHECKPOINT_OBJECTS.bookkeeping]: archive };
}

/**
 * Like Promise.all, but rejects only once every promise has settled: work still writing into the scratch folder when
 * the first one fails would race its removal.
 */
async function allSettled<T>(promises: Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((outcome) => outcome.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((outcome) => (outcome as PromiseFulfilledResult<T>).value);
}

function tooLarge(runId: string, object: string, bytes: number | undefined, maxBytes: number, detail?: string): CheckpointTooLargeError {
  const size = bytes === undefined ? (detail ?? 'more') : `${bytes} bytes`;
  return new CheckpointTooLargeError(
    `the checkpoint of run ${runId} (${object}: ${size}) is over the cap ${CHECKPOINT_MAX_BYTES_VARIABLE}=${maxBytes} bytes; raise the setting, or keep large files out of the workspace (.gitignore them: ignored files are not checkpointed)`,
  );
}

/**
 * Deletes the run's replaceable checkpoints but the newest and the one before it (while the newest is being replaced)
 * and the checkpoints their bookkeeping chains to; stages' first-start checkpoints are never replaceable. Reads and
 * updates the run's index (latest.ts) instead of listing the run's checkpoints, which grow with the run.
 */
async function forgetOlder(options: CheckpointOptions, run: RunRef, newest: CheckpointManifest): Promise<void> {
  const index = (await readLatestCheckpoints(options.store, run)) ?? (await indexFromListing(options, run, newest.id));
  const needed = new Set([newest.id, ...(newest.bookkeepingChain ?? [])]);
  if (index.id !== newest.id) for (const link of [index.id, ...(await chainOf(options, run, index.id))]) needed.add(link);
  const replaceable: string[] = [];
  for (const id of index.replaceable) {
    if (id === newest.id) continue;
    if (needed.has(id)) replaceable.push(id);
    else await options.store.deletePrefix(`${checkpointsPrefix(run)}${id}/`);
  }
  if (newest.stage === undefined) replaceable.push(newest.id);
  await writeLatestCheckpoints(options.store, run, { id: newest.id, replaceable });
}

/** The index of a run checkpointed before there was one: its checkpoints listed, the newest before `newest` first. */
async function indexFromListing(options: CheckpointOptions, run: RunRef, newest: string): Promise<LatestCheckpoints> {
  const entries = (await listCheckpointEntries(options.store, run)).filter((entry) => entry.id !== newest);
  return { id: entries.at(-1)?.id ?? newest, replaceable: entries.filter((entry) => !entry.stageStart).map((entry) => entry.id) };
}

/** The bookkeeping chain checkpoint `id`'s manifest names; none when it cannot be read. */
async function chainOf(options: CheckpointOptions, run: RunRef, id: string): Promise<string[]> {
  return (await readCheckpointManifest(options.store, run, id))?.bookkeepingChain ?? [];
}
