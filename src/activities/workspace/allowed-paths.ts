import { realpathSync } from 'node:fs';
import path from 'node:path';
import { isInside } from '../../files/inside.js';
import type { RunRef } from '../../pipeline/run-state.js';
import { stageFailure } from '../failures.js';
import { runFolder } from './run-folder.js';
import { workerFolder } from './worker-folder.js';

/*
 * The host folders a run may name (`workspace.repo`, `workspace.dir`, `addDirs`). Whoever can start a run on a task queue would
 * otherwise choose any folder of the worker's host as the agents' repository or extra folder. The worker's setting
 * lists the folders it lends out. Of the workspaces root a run may name only what is its own (its run folder, and the
 * folder its carried files were unpacked in): never the root itself or another run's folder, and never (whatever the
 * setting) the workers' own folder, nor a folder that holds it.
 */

/** Where the run whose paths are checked lives: the workspaces root, the run, and the folder its pipeline's paths are relative to. */
export interface RunPlace extends RunRef {
  workspacesRoot: string;
  baseDir: string;
}

/** The folders under the workspaces root that belong to the run: its own folder, and its unpacked bundle's. */
function ownFolders(place: RunPlace): string[] {
  return [runFolder(place.workspacesRoot, place), ...(isInsideReal(place.workspacesRoot, place.baseDir) ? [place.baseDir] : [])];
}

/** Whether `folder` is `root` or below it, both by their real paths where they exist. */
function isInsideReal(root: string, folder: string): boolean {
  return isInside(realOrSelf(root), realOrSelf(folder));
}

/** The variable that lists them, separated like PATH (`:` on Linux and macOS), or `*` for any folder. */
export const ALLOWED_PATHS_VARIABLE = 'AGENT_PIPELINE_ALLOWED_PATHS';

/** Any folder (`agent-pipeline dev`: one person, their own machine), or these folders and what is below them. */
export type AllowedPaths = 'any' | readonly string[];

/**
 * Reads a worker setting that lists folders like PATH (`*` for any): {@link ALLOWED_PATHS_VARIABLE} and
 * `AGENT_PIPELINE_PIPELINE_DIRS`. `undefined` when unset, so the caller picks its own default.
 */
export function parseFolderList(value: string | undefined): AllowedPaths | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  if (value.trim() === '*') return 'any';
  return value.split(path.delimiter).map((entry) => entry.trim()).filter(Boolean).map((entry) => path.resolve(entry));
}

/**
 * Fails the stage (for good) when `folder`, after following symlinks, is neither one of the run's own folders nor in
 * one of the allowed folders. `named` is the path as the run named it, when `folder` is its real path already.
 * @throws CONFIG_INVALID naming the field, the folder and the setting
 */
export function checkAllowedPath(allowed: AllowedPaths, place: RunPlace, folder: string, field: string, stageId: string, named = folder): void {
  // The workers' own folder (every run's bookkeeping, the unpacked bundles) is no run's, whatever the setting lends.
  // Resolved from the root's real path: the folder may not exist yet, and the root may be a symlink to a volume.
  const own = workerFolder(realOrSelf(place.workspacesRoot));
  // A repository may hold it (`repo: .` with the workspaces folder in the project): agents work in a worktree of the
  // repository in their run's folder, never in the repository itself. Folders agents work in may not.
  const holds = field !== 'workspace.repo' && isInsideReal(folder, own);
  if (isInsideReal(own, folder) || holds) {
    throw stageFailure({
      type: 'CONFIG_INVALID',
      stageId,
      message: `${field} names ${folder}, which ${isInsideReal(own, folder) ? 'lies in' : 'holds'} the workers' own folder ${own} (every run's bookkeeping and file cache); it is never lent to a run`,
      hint: 'name a folder of its own: not the workspaces root, nor a folder above it or in its .agent-pipeline',
      details: { field, path: folder },
    });
  }
  if (allowed === 'any') return;
  if ([...ownFolders(place), ...allowed].some((root) => isInsideReal(root, folder))) return;
  const leadsTo = named === folder ? '' : ` (which leads to ${folder})`;
  throw stageFailure({
    type: 'CONFIG_INVALID',
    stageId,
    message: `${field} names ${named}${leadsTo}, a folder this worker does not lend to runs; it allows only the run's own folder${allowed.length ? ` and ${allowed.join(', ')}` : ''}`,
    hint: `add the folder to ${ALLOWED_PATHS_VARIABLE} on the worker (folders separated by "${path.delimiter}", or * for any), or use a folder already allowed; another run's folder, or the workspaces root itself, is never lent`,
    details: { field, path: named },
  });
}

function realOrSelf(folder: string): string {
  try {
    return realpathSync(folder);
  } catch {
    return path.resolve(folder);
  }
}
