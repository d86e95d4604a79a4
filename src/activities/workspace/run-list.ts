import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { isRealDir } from './own-files.js';
import { readEndedMarker, type EndedMarker } from './remove-workspace.js';
import type { RunRef } from '../../pipeline/run-state.js';
import { bookkeepingFolder, bookkeepingRun, OLD_BOOKKEEPING_DIR, oldRecordedRunId, toFolderName, toLegacyFolderName } from './run-folder.js';
import { runsFolder } from './worker-folder.js';

/*
 * The runs a workspaces root holds, as `prune` sees them. What decides is the bookkeeping in the worker's own folder,
 * which no agent can write; a run folder's own content (an agent's tree) never names a run or says it ended. Only a
 * run whose bookkeeping never left its tree (it ended before the worker's own folder existed) is known by its in-tree
 * records, and those are marked as such: its agent could have written them.
 */

/** One run under the workspaces root. */
export interface RunOnDisk {
  /** The name its folder and its bookkeeping folder share. */
  name: string;
  /** The run's folder (the agents' tree), when there is one (a lent run, `workspace.dir`, has none). */
  dir?: string;
  /** Its bookkeeping folder in the worker's own folder, when there is one. */
  bookkeeping?: string;
  /** The run id its records name, when that id's folder is this one; `undefined` when none does. */
  runId?: string;
  /** The Temporal run id of the run's first execution, when its records give it and its folder is named after it. */
  firstExecutionRunId?: string;
  /** The `ended` record. */
  ended?: EndedMarker;
  /** Its records were read from inside its own tree, where its agent could have written them. */
  recordsInTree: boolean;
}

/**
 * Every run under `root`: the bookkeeping folders of `<root>/.agent-pipeline/runs/`, and the run folders of `root`.
 * Dot names are never runs (the worker's own folder, the old bundle cache), nor is a symlink.
 */
export async function listRunsOnDisk(root: string): Promise<RunOnDisk[]> {
  const folders = async (dir: string): Promise<string[]> =>
    (await readdir(dir, { withFileTypes: true }).catch(() => [])).filter((e) => e.isDirectory() && !e.name.startsWith('.')).map((e) => e.name);
  const names = [...new Set([...(await folders(runsFolder(root))), ...(await folders(root))])].sort();
  return Promise.all(names.map((name) => runOnDisk(root, name)));
}

async function runOnDisk(root: string, name: string): Promise<RunOnDisk> {
  const dir = path.join(root, name);
  const bookkeeping = bookkeepingFolder(root, name);
  const hasDir = await isRealDir(dir);
  if (await isRealDir(bookkeeping)) {
    const run = ownRun(name, bookkeepingRun(bookkeeping));
    const runId = run?.runId;
    const first = run?.firstExecutionRunId === undefined ? {} : { firstExecutionRunId: run.firstExecutionRunId };
    return { name, ...(hasDir ? { dir } : {}), bookkeeping, runId, ...first, ended: await endedOf(bookkeeping, runId), recordsInTree: false };
  }
  // Bookkeeping still in its tree is of a run that ended before runs had folders of their own.
  const old = oldRecordedRunId(dir);
  const runId = old === undefined ? undefined : ownRun(name, { runId: old })?.runId;
  return { name, dir, runId, ended: await endedOf(path.join(dir, OLD_BOOKKEEPING_DIR), runId), recordsInTree: true };
}

/**
 * `run` when its folder is `name` (as named now; for a run that names no first execution, as named before folders
 * carried that, or a hash): a record cannot claim another run's folder.
 */
function ownRun(name: string, run: RunRef | undefined): RunRef | undefined {
  if (run === undefined) return undefined;
  const { runId, firstExecutionRunId } = run;
  if (firstExecutionRunId !== undefined) return toFolderName(runId, firstExecutionRunId) === name ? run : undefined;
  return toFolderName(runId) === name || toLegacyFolderName(runId) === name ? run : undefined;
}

/** The `ended` record in `folder`, when it names `runId`. */
async function endedOf(folder: string, runId: string | undefined): Promise<EndedMarker | undefined> {
  if (runId === undefined || !(await isRealDir(folder))) return undefined;
  const marker = await readEndedMarker(folder);
  return marker?.runId === runId ? marker : undefined;
}
