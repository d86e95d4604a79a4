import { randomUUID } from 'node:crypto';
import { existsSync, readlinkSync, statSync, type Dirent } from 'node:fs';
import { mkdir, realpath, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { isInside, resolveInside } from '../../files/inside.js';
import { hashRegularFile } from '../../files/regular-file.js';
import type { RunRef } from '../../pipeline/run-state.js';
import type { ArtifactRef } from '../../pipeline/stage-result.js';
import { capArtifacts, describeOmittedArtifacts, MAX_LISTED_ARTIFACTS, type OmittedArtifacts } from '../../pipeline/output-caps.js';
import { walkFolders } from './folder-walk.js';
import { ensureWorktree, type WorktreeOptions } from './git.js';

import { moveOldBookkeeping } from './old-bookkeeping.js';
import { ensureRealDir } from './own-files.js';
import { ENDED_MARKER, RUN_RECORD, runPaths } from './run-folder.js';
import { openWorkerSubfolder } from './worker-folder.js';
import { recordWorktreeBase } from './worktree-base.js';

export { toFolderName } from './run-folder.js';
const IGNORED_DIRS = new Set(['.git', 'node_modules']);

/** Where a run's files live. One folder per run, shared by all its stages and all their attempts. */
export interface RunWorkspace {
  /** The run folder: the agents' working directory and where artifacts land. */
  dir: string;
  /**
   * The run's bookkeeping folder, `<workspaces root>/.agent-pipeline/runs/<run folder name>/`: its records, Claude
   * Code's config, each stage's logs and settings. Outside every agent's tree, so nothing an agent plants is in it.
   */
  bookkeeping: string;
  /** Claude Code's config dir for this run, so any worker that sees the workspaces folder can resume a session. */
  claudeConfigDir: string;
  /** Per-stage bookkeeping folder (transcripts, baselines, API conversations); {@link openStageFolder} creates it. */
  stageDir(stageId: string): string;
  /** The run's branch, when the folder is a git worktree of `pipeline.workspace.repo`. */
  branch?: string;
  /** Under `isolation: stage`, this is a stage's own worktree and `parent` the run's. */
  parent?: RunWorkspace;
  /** With `workspace.dir`: `dir` is the folder the run was lent, not a folder of its own. */
  lent?: boolean;
}

/** Options of {@link openRunWorkspace}. */
export interface OpenRunOptions {
  /** The folder is a worktree of this repository on the run's branch. */
  git?: WorktreeOptions;
  /** Who opens it, for failure messages. */
  stageId?: string;
  /** The run works in a folder it was lent (`workspace.dir`): only its bookkeeping is opened here. */
  lent?: boolean;
}

/**
 * Creates (or reopens) the workspace of a run under `root`; with `git`, the folder is a worktree of
 * the repository on the run's branch. Idempotent, so every stage and retry reuses it.
 * @throws OwnFolderError when the bookkeeping folder (or one above it) is a symlink
 */
export async function openRunWorkspace(root: string, run: RunRef, options: OpenRunOptions = {}): Promise<RunWorkspace> {
  const paths = runPaths(root, run);
  const moved = await moveOldBookkeeping(root, paths, run, options.git?.repo);
  const bookkeeping = await ensureRealDir(await openWorkerSubfolder(root, 'runs'), path.basename(paths.bookkeeping));
  // A run that reopens its folder (a reset; a reused id of a run started before runs had folders of their own) is
  // running again: `prune` must not take it as ended.
  await rm(path.join(bookkeeping, ENDED_MARKER), { force: true });
  await recordRunId(bookkeeping, run);
  const claudeConfigDir = await ensureRealDir(bookkeeping, 'claude');
  if (options.lent) {
    // A lent run's own folder only ever held its bookkeeping: once that moved out, the empty folder goes.
    if (moved) await rmdir(paths.dir).catch(() => undefined);
  } else if (options.git) {
    // `git worktree add` wants a missing or empty folder, and makes it.
    await ensureWorktree(paths.dir, options.git, options.stageId ?? '(workspace)');
    // What a checkpoint's bundle is relative to (checkpoint/git-snapshot.ts).
    await recordWorktreeBase(paths.dir, bookkeeping);
  } else {
    await mkdir(paths.dir, { recursive: true });
  }
  return {
    dir: paths.dir,
    bookkeeping,
    claudeConfigDir,
    stageDir: (stageId) => path.join(bookkeeping, 'stages', stageId),
    branch: options.git?.branch,
  };
}

/**
 * Names `run` in its bookkeeping folder (for `prune` and later openings), unless a record does already: its id and,
 * when it has one, its first execution's Temporal run id, which its folder's name holds only as a hash.
 */
export async function recordRunId(bookkeeping: string, run: RunRef): Promise<void> {
  const record = path.join(bookkeeping, RUN_RECORD);
  const { runId, firstExecutionRunId } = run;
  if (!existsSync(record)) await writeFileAtomic(record, `${JSON.stringify(firstExecutionRunId === undefined ? { runId } : { runId, firstExecutionRunId })}\n`);
}

/**
 * The stage's bookkeeping folder (and the folders `more` names below it), created as real folders, never through a
 * symlink. @throws OwnFolderError naming the folder that is a symlink
 */
export function openStageFolder(workspace: RunWorkspace, stageId: string, ...more: string[]): Promise<string> {
  return ensureRealDir(workspace.bookkeeping, 'stages', stageId, ...more);
}

/** `full` as artifacts and claims name it: relative to the workspace `dir`, with `/` separators. */
export function workspacePath(dir: string, full: string): string {
  return path.relative(dir, full).split(path.sep).join('/');
}

/** Size and modification time of every file (or a symlink's target), keyed by workspace-relative path. */
export type FileSnapshot = Map<string, { bytes: number; mtimeMs: number; link?: string }>;

/** Records the files in `dir` so artifacts can later be found as what an attempt created or changed. */
export async function snapshotFiles(dir: string): Promise<FileSnapshot> {
  const snapshot: FileSnapshot = new Map();
  const keep = (_key: string, entry: Dirent): boolean => !(entry.isDirectory() && IGNORED_DIRS.has(entry.name));
  for await (const entries of walkFolders(dir, { keep, unreadable: 'skip' })) {
    for (const { entry, key, full } of entries) {
      if (entry.isSymbolicLink()) {
        snapshot.set(key, { bytes: 0, mtimeMs: 0, link: orUndefined(() => readlinkSync(full)) ?? '' });
      } else if (entry.isFile() && entry.name !== '.git') {
        // A file gone or changed into something unreadable since the folder was read is left out.
        const info = orUndefined(() => statSync(full));
        if (info) snapshot.set(key, { bytes: info.size, mtimeMs: info.mtimeMs });
      }
    }
  }
  return snapshot;
}

function orUndefined<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}

/**
 * Files that are new or changed since `before`, with size and sha256, sorted by path: the first
 * `MAX_LISTED_ARTIFACTS`, the rest counted by top folder in `omitted` (and told in `warnings`), so a stage that
 * fills a `.venv` reports a small result. Symlinks are never artifacts; a new one that points outside the
 * workspace is reported in `warnings`.
 */
export async function collectArtifacts(
  dir: string,
  before: FileSnapshot,
  limit = MAX_LISTED_ARTIFACTS,
): Promise<{ artifacts: ArtifactRef[]; omitted?: OmittedArtifacts; warnings: string[] }> {
  const after = await snapshotFiles(dir);
  const changed = [...after]
    .filter(([file, now]) => {
      const then = before.get(file);
      return !then || then.bytes !== now.bytes || then.mtimeMs !== now.mtimeMs || then.link !== now.link;
    })
    .sort(([a], [b]) => a.localeCompare(b));
  const warnings: string[] = [];
  for (const [file, info] of changed) {
    if (info.link !== undefined && !(await resolveExistingInside(dir, file))) {
      warnings.push(`${file} is a symlink to ${info.link}, outside the workspace; it is not reported as an artifact`);
    }
  }
  const files = changed.filter(([, info]) => info.link === undefined).map(([file, info]) => ({ path: file, bytes: info.bytes }));
  // Only the listed files are hashed: hashing 20,000 files of a `.venv` would cost minutes for nothing.
  const { listed, omitted } = capArtifacts(files, limit);
  const artifacts: ArtifactRef[] = [];
  for (const file of listed) {
    // On the file as opened, never by its path again: a stage running alongside may have swapped it since the listing
    // for a FIFO (whose open would wait for a writer on one of libuv's few threads) or a symlink; either is left out.
    const hashed = await hashRegularFile(path.join(dir, file.path)).catch(() => undefined);
    if (hashed) artifacts.push({ ...file, bytes: hashed.bytes, sha256: hashed.sha256 });
  }
  if (omitted) warnings.push(`the stage changed ${listed.length + omitted.count} files; the first ${listed.length} by path are listed as artifacts, not the ${describeOmittedArtifacts(omitted)}`);
  return { artifacts, ...(omitted ? { omitted } : {}), warnings };
}

/** Writes a file so readers see the old content or the new, never half of it. */
export async function writeFileAtomic(file: string, data: string | Uint8Array): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${randomUUID()}.tmp`;
  try {
    await writeFile(temp, data);
    await rename(temp, file);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}

/** Thrown when a write would land outside the folder it belongs in (its parent is, or passes through, a symlink leading out). */
export class WriteOutsideError extends Error {
  override readonly name = 'WriteOutsideError';
}

/**
 * {@link writeFileAtomic} for a file that must stay inside `dir` (an agent may have turned a folder into a symlink):
 * the parent's real path, once created, must lie inside `dir`'s real path. A symlink at the file itself is replaced,
 * never followed. @throws WriteOutsideError naming the file and where its folder leads
 */
export async function writeFileInside(dir: string, relative: string, data: string | Uint8Array): Promise<void> {
  const file = resolveInside(dir, relative);
  if (!file) throw new WriteOutsideError(`${relative} is not a path inside ${dir}`);
  await mkdir(path.dirname(file), { recursive: true });
  const [realDir, realParent] = await Promise.all([realpath(dir), realpath(path.dirname(file))]);
  if (!isInside(realDir, realParent)) throw new WriteOutsideError(`${relative} would be written to ${realParent}, outside ${dir}: its folder is a symlink leading out`);
  await writeFileAtomic(path.join(realParent, path.basename(file)), data);
}

/**
 * Like `resolveInside`, and also follows symlinks: returns the path when it exists and its real
 * location is inside `dir`; `undefined` when it escapes or does not exist.
 */
export async function resolveExistingInside(dir: string, relative: string): Promise<string | undefined> {
  const full = resolveInside(dir, relative);
  if (!full) return undefined;
  try {
    const [realDir, realFull] = await Promise.all([realpath(dir), realpath(full)]);
    return isInside(realDir, realFull) ? full : undefined;
  } catch {
    return undefined;
  }
}
