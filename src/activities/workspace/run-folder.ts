import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/*
 * Where a run's folder is. The folder is named after the run id made safe for a file name, plus a short hash of the
 * exact id, so two ids that read the same once made safe (`feature/x` and `feature_x`) never share a folder, and no
 * id names the workspaces root or the folder above it.
 */

/** Our own bookkeeping inside a run folder: transcripts, sessions, baselines. Never reported as artifacts. */
export const INTERNAL_DIR = '.agent-pipeline';

/** The record a run leaves in its bookkeeping folder when it ends (see `remove-workspace.ts`). */
export const ENDED_MARKER = 'ended.json';

/** Names the run a folder belongs to (its folder name holds only the id made safe), for `prune` and later openings. */
export const RUN_RECORD = 'run.json';

/** Characters of the hash that ends a run folder's name. */
const HASH_CHARS = 10;

/** The folder name of a run: its id made safe (`[A-Za-z0-9._-]`, no leading dot) plus a short hash of the exact id. */
export function toFolderName(runId: string): string {
  const hash = createHash('sha256').update(runId).digest('hex').slice(0, HASH_CHARS);
  const safe = runId.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_').slice(0, 100);
  return `${safe}-${hash}`;
}

/** The name releases before the hash gave a run's folder; kept to find the folders of runs started then. */
export function toLegacyFolderName(runId: string): string {
  return runId.replace(/[^A-Za-z0-9._-]/g, '_');
}

/**
 * The folder of run `runId` under `root`. A run started before folders carried a hash keeps its old folder: when a
 * folder of the old name exists, no folder of the new one does, and the old folder records no other run as its own.
 */
export function runFolder(root: string, runId: string): string {
  const dir = path.join(root, toFolderName(runId));
  const legacyName = toLegacyFolderName(runId);
  if (existsSync(dir) || legacyName === '' || legacyName === '.' || legacyName === '..') return dir;
  const legacy = path.join(root, legacyName);
  if (!existsSync(legacy)) return dir;
  return (recordedRunId(legacy) ?? runId) === runId ? legacy : dir;
}

/** The run id a folder records as its own (its run record, or its `ended` record), if it records one. */
export function recordedRunId(dir: string): string | undefined {
  for (const record of [RUN_RECORD, ENDED_MARKER]) {
    try {
      const parsed = JSON.parse(readFileSync(path.join(dir, INTERNAL_DIR, record), 'utf8')) as { runId?: unknown };
      if (typeof parsed.runId === 'string') return parsed.runId;
    } catch {
      // No such record: try the next.
    }
  }
  return undefined;
}
