import { z } from 'zod';
import type { RunRef } from '../../pipeline/run-state.js';
import { hashRegularFile } from '../../files/regular-file.js';
import type { ObjectStore } from '../../store/object-store.js';
import { checkpointKey, MANIFEST_OBJECT } from './keys.js';

/*
 * A checkpoint is a few objects under `runs/<sha256 of the run id>/checkpoints/<id>/` and, written last, its manifest:
 * a checkpoint without a manifest is one whose writer died half-way, and is never read. The manifest names every
 * object with its size and sha256, so a restore checks every byte before it changes anything.
 */

/** The objects a checkpoint may hold. */
export const CHECKPOINT_OBJECTS = {
  /** A git bundle of the run's branch and the work-in-progress commit, relative to the recorded base. */
  gitBundle: 'workspace.bundle',
  /** A tar archive of a plain run folder (no git). */
  folderArchive: 'workspace.tar',
  /** A tar archive of the run's bookkeeping folder (records, Claude Code's sessions, transcripts, API conversations). */
  bookkeeping: 'bookkeeping.tar',
} as const;

const objectSchema = z.strictObject({ bytes: z.number().int().nonnegative(), sha256: z.string().regex(/^[0-9a-f]{64}$/) });

const gitSchema = z.strictObject({
  /** The repository whose worktree the run folder is (`workspace.repo`, resolved). */
  repo: z.string(),
  branch: z.string(),
  /** The commit the run's worktree was created from: the bundle's prerequisite. */
  base: z.string().regex(/^[0-9a-f]{40,64}$/),
  /** The branch's tip when the checkpoint was taken. */
  tip: z.string().regex(/^[0-9a-f]{40,64}$/),
  /** The work in progress: a commit of the whole worktree (tracked, changed and untracked files) on top of `tip`. */
  work: z.string().regex(/^[0-9a-f]{40,64}$/),
  /** The hidden ref in the bundle naming `work`. */
  ref: z.string(),
});

export const manifestSchema = z.strictObject({
  version: z.literal(1),
  runId: z.string(),
  /** The checkpoint's id, also the last segment of its key prefix. */
  id: z.string(),
  /** @format ISO 8601 */
  takenAt: z.string(),
  /** Why it was taken: `start`, `periodic`, `end`. */
  reason: z.string(),
  /**
   * With reason `start` of a stage's first start (round 1, attempt 1): that stage's id. A fork from the stage starts
   * from this checkpoint, which is kept while the run's other checkpoints are replaced (see stage-start.ts).
   */
  stage: z.string().optional(),
  /** The run folder's path on the host that took it: Claude Code keys its sessions by this path. */
  runDir: z.string(),
  /** `git` (a worktree), `folder` (a plain folder) or `none` (a lent folder: only the bookkeeping). */
  kind: z.enum(['git', 'folder', 'none']),
  git: gitSchema.optional(),
  /**
   * The checkpoints whose bookkeeping archives come before this one's, oldest first (the first holds it whole): this
   * one's archive holds only what changed since the last of them (bookkeeping-delta.ts). Absent: it is whole.
   */
  bookkeepingChain: z.array(z.string()).max(64).optional(),
  /** Bookkeeping paths (`./`-prefixed) removed since the last checkpoint of the chain. */
  bookkeepingRemoved: z.array(z.string()).optional(),
  objects: z.record(z.string(), objectSchema),
});
export type CheckpointManifest = z.infer<typeof manifestSchema>;

/**
 * The sha256 and size of a local file (an object written or fetched into the checkpoint's scratch folder), read as it
 * was when opened: never through a symlink, never waiting on a FIFO, only a regular file.
 */
export async function describeFile(file: string): Promise<{ bytes: number; sha256: string }> {
  return hashRegularFile(file);
}

/** Largest manifest read. @unit bytes */
const MAX_MANIFEST_BYTES = 1024 * 1024;

/**
 * The manifest of checkpoint `id` of `run`, or undefined when it is missing, malformed, or names another run or
 * checkpoint (the store was changed by hand): the one reader of manifests.
 */
export async function readCheckpointManifest(store: ObjectStore, run: RunRef, id: string): Promise<CheckpointManifest | undefined> {
  const bytes = await store.get(checkpointKey(run, id, MANIFEST_OBJECT), MAX_MANIFEST_BYTES);
  if (!bytes) return undefined;
  let parsed: ReturnType<typeof manifestSchema.safeParse>;
  try {
    parsed = manifestSchema.safeParse(JSON.parse(Buffer.from(bytes).toString('utf8')));
  } catch {
    return undefined;
  }
  return parsed.success && parsed.data.id === id && parsed.data.runId === run.runId ? parsed.data : undefined;
}
