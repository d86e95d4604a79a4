import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { isRealDirSync, readRecordSync } from './own-files.js';
import type { RunRef } from '../../pipeline/run-state.js';
import { runsFolder } from './worker-folder.js';

/*
 * Where a run's folder is, and where its bookkeeping is. The folder is named after the run id made safe for a file
 * name, plus a short hash of the exact id, so two ids that read the same once made safe (`feature/x` and `feature_x`)
 * never share a folder, and no id names the workspaces root or the folder above it; then a short hash of the Temporal
 * run id of the run's first execution, so a run started under the id of a run that ended has a folder of its own
 * (runs started before that part existed keep the name without it). The bookkeeping lives in the worker's own folder,
 * `<root>/.agent-pipeline/runs/<the same name>/`, outside every tree an agent works in.
 */

/**
 * Where releases before the worker's own folder kept a run's bookkeeping: inside the run's folder, where its agent
 * could rewrite it. Read only to move it out (`moveOldBookkeeping`) and to read transcripts of runs that ended before.
 */
export const OLD_BOOKKEEPING_DIR = '.agent-pipeline';

/** The record a run leaves in its bookkeeping folder when it ends (see `remove-workspace.ts`). */
export const ENDED_MARKER = 'ended.json';

/** Names the run a bookkeeping folder belongs to (a folder name holds only the id made safe), for `prune` and later openings. */
export const RUN_RECORD = 'run.json';

/** Characters of the hash of the run id in a run folder's name. */
const HASH_CHARS = 10;
/**
 * Characters of the hash of the first execution's run id that ends a run folder's name: 48 bits, so the runs of one id
 * never meet. The whole Temporal run id is hashed: of a time-ordered (UUIDv7) one, a prefix changes about once a minute.
 */
const EXECUTION_HASH_CHARS = 12;
const EXECUTION_HASH = new RegExp(`^[0-9a-f]{${EXECUTION_HASH_CHARS}}$`);

/**
 * The folder name of a run: its id made safe (`[A-Za-z0-9._-]`, no leading dot), a short hash of the exact id and, for a
 * run started since runs had folders of their own, a short hash of its first execution's Temporal run id.
 */
export function toFolderName(runId: string, firstExecutionRunId?: string): string {
  const hash = createHash('sha256').update(runId).digest('hex').slice(0, HASH_CHARS);
  const safe = runId.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_').slice(0, 100);
  if (firstExecutionRunId === undefined) return `${safe}-${hash}`;
  return `${safe}-${hash}-${createHash('sha256').update(firstExecutionRunId).digest('hex').slice(0, EXECUTION_HASH_CHARS)}`;
}

/** The name releases before the hash gave a run's folder; kept to find the folders of runs started then. */
export function toLegacyFolderName(runId: string): string {
  return runId.replace(/[^A-Za-z0-9._-]/g, '_');
}

/** A run's folder (the agents' tree) and its bookkeeping folder (the worker's own). */
export interface RunPaths {
  dir: string;
  bookkeeping: string;
}

/** {@link runFolder} and the bookkeeping folder named after it. */
export function runPaths(root: string, run: RunRef): RunPaths {
  const dir = runFolder(root, run);
  return { dir, bookkeeping: bookkeepingFolder(root, path.basename(dir)) };
}

/** The bookkeeping folder of the run whose folder is `<root>/<name>`. */
export function bookkeepingFolder(root: string, name: string): string {
  return path.join(runsFolder(root), name);
}

/**
 * The folder of `run` under `root`. A run that names its first execution has a folder of that name, never another. A
 * run started before folders carried a hash keeps its old folder, but only when a record of that run names exactly
 * this id: an existing folder is never adopted on its name alone (the worker's own dot folders, or anyone's folder
 * that happens to bear the name, would become the run's workspace).
 */
export function runFolder(root: string, run: RunRef): string {
  const { runId, firstExecutionRunId } = run;
  const name = toFolderName(runId, firstExecutionRunId);
  const dir = path.join(root, name);
  if (firstExecutionRunId !== undefined) return dir;
  const legacyName = toLegacyFolderName(runId);
  if (existsSync(dir) || existsSync(bookkeepingFolder(root, name)) || legacyName === '' || legacyName.startsWith('.')) return dir;
  const legacy = path.join(root, legacyName);
  // A lent run (`workspace.dir`) of that time may have only its bookkeeping left, moved out of its old folder.
  if (!isRealDirSync(legacy) && !isRealDirSync(bookkeepingFolder(root, legacyName))) return dir;
  return recordedRunId(root, legacyName) === runId ? legacy : dir;
}

/**
 * A folder under `root` (a run folder, or its bookkeeping) of another run that bore `run`'s id: one named after the id
 * alone (a run started before runs had folders of their own), or after the id and another first execution. Undefined
 * when there is none.
 */
export async function otherRunFolder(root: string, run: RunRef): Promise<string | undefined> {
  const own = toFolderName(run.runId, run.firstExecutionRunId);
  const idName = toFolderName(run.runId);
  const ofTheId = (name: string): boolean => name !== own && (name === idName || (name.startsWith(`${idName}-`) && EXECUTION_HASH.test(name.slice(idName.length + 1))));
  for (const folder of [root, runsFolder(root)]) {
    const found = (await readdir(folder).catch(() => [] as string[])).find(ofTheId);
    if (found !== undefined) return path.join(folder, found);
  }
  return undefined;
}

/**
 * The run id the folder `<root>/<name>` records as its own: its bookkeeping's run record or `ended` record, or for a
 * run whose bookkeeping has not been moved out of its tree yet, those records in the tree.
 */
export function recordedRunId(root: string, name: string): string | undefined {
  return bookkeepingRunId(bookkeepingFolder(root, name)) ?? oldRecordedRunId(path.join(root, name));
}

/** The run id the old in-tree bookkeeping of `dir` records, when it has a real folder of it. */
export function oldRecordedRunId(dir: string): string | undefined {
  const old = path.join(dir, OLD_BOOKKEEPING_DIR);
  return isRealDirSync(old) ? bookkeepingRunId(old) : undefined;
}

/** The run id the records in the bookkeeping folder `bookkeeping` name. */
export function bookkeepingRunId(bookkeeping: string): string | undefined {
  return bookkeepingRun(bookkeeping)?.runId;
}

/** The run the records in the bookkeeping folder `bookkeeping` name: its id and, when they give it, its first execution. */
export function bookkeepingRun(bookkeeping: string): RunRef | undefined {
  for (const record of [RUN_RECORD, ENDED_MARKER]) {
    const { runId, firstExecutionRunId } = readRecordSync<{ runId?: unknown; firstExecutionRunId?: unknown }>(path.join(bookkeeping, record)) ?? {};
    if (typeof runId === 'string') return typeof firstExecutionRunId === 'string' ? { runId, firstExecutionRunId } : { runId };
  }
  return undefined;
}
