import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { ensureRealDir } from './own-files.js';

/*
 * The worker's own folder under the workspaces root, `<root>/.agent-pipeline/`: each run's bookkeeping (`runs/<run
 * folder name>/`: its records, Claude Code's config, the stages' logs and settings), the unpacked run bundles
 * (`bundles/<hash>/`), the default object store (`store/`) and the locks its processes share (`locks/`). Its name
 * starts with a dot, which no run folder's can (run ids may not, pipeline/run-id.ts, and folder names made from them
 * never do), so no run is ever given it or anything in it as its workspace: agents work elsewhere, and nothing the
 * worker keeps for itself sits in a tree an agent writes.
 */

/** The name of the worker's own folder under the workspaces root; written here only. */
export const WORKER_FOLDER = '.agent-pipeline';

/** The worker's own folder under the workspaces root `root`. */
export function workerFolder(root: string): string {
  return path.join(root, WORKER_FOLDER);
}

/** The workers' own folder that holds the run bookkeeping folder `bookkeeping` (`<it>/runs/<name>`). */
export function workerFolderOfRun(bookkeeping: string): string {
  return path.dirname(path.dirname(bookkeeping));
}

/** What the worker's own folder holds, one folder each. */
const SUBFOLDERS = {
  /** Each run's bookkeeping, one folder per run, named as the run's folder is. */
  runs: 'runs',
  /** Unpacked run bundles, one folder per bundle hash. */
  bundles: 'bundles',
  /** Checkpoints being written or restored (bundles, archives, a temporary git index), one folder each, removed after. */
  scratch: 'scratch',
  /** The default object store (`AGENT_PIPELINE_STORE` unset): checkpoints and payloads too large for history. */
  store: 'store',
  /** A record of each folder lent to a run (`workspace.dir`, `addDirs`): never a run's repository after (lent-records.ts). */
  lent: 'lent',
  /** Locks the worker processes sharing this folder hold across processes, one folder each (shared-lock.ts). */
  locks: 'locks',
} as const;

/** Where each run's bookkeeping lives. */
export function runsFolder(root: string): string {
  return path.join(workerFolder(root), SUBFOLDERS.runs);
}

/** Where unpacked run bundles live. */
export function bundlesFolder(root: string): string {
  return path.join(workerFolder(root), SUBFOLDERS.bundles);
}

/** The default object store's folder: the worker's own, so never a run's and never in an agent's reach. */
export function storeFolder(root: string): string {
  return path.join(workerFolder(root), SUBFOLDERS.store);
}

/**
 * Creates `<root>/.agent-pipeline/<which>/` as real folders (never through a symlink) and returns its path.
 * @throws OwnFolderError when one of them is a symlink or not a folder
 */
export async function openWorkerSubfolder(root: string, which: keyof typeof SUBFOLDERS): Promise<string> {
  await mkdir(root, { recursive: true });
  return ensureRealDir(root, WORKER_FOLDER, SUBFOLDERS[which]);
}
