import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import type { RunRef } from '../../pipeline/run-state.js';
import { renderTemplate, type TemplateContext } from '../../pipeline/template.js';
import { stageFailure } from '../failures.js';
import { withTemplateErrors } from '../prompt/stage-prompt.js';
import { checkAllowedPath, type AllowedPaths, type RunPlace } from './allowed-paths.js';
import { recordLentFolder } from './lent-records.js';
import { openRunWorkspace, type RunWorkspace } from './run-workspace.js';

/*
 * `workspace.dir`: a run that works in an existing folder it was lent (a caller's worktree, a team's shared folder)
 * instead of a folder of its own. The agents work there and their outputs land there; everything the worker keeps
 * for itself (transcripts, sessions, baselines, Claude Code's config) stays in the run's bookkeeping folder in the
 * worker's own folder, so the lent folder gets no bookkeeping files. The worker never creates, branches, commits in,
 * cleans or removes a lent folder.
 */

/** Where the lent folder is and who lends it: the settings and the worker's allowed folders. */
export interface LentFolderOptions extends RunRef {
  root: string;
  /** `workspace.dir` as written: a path relative to `baseDir`, or a template such as `{{inputs.worktree}}`. */
  dir: string;
  baseDir: string;
  context: TemplateContext;
  allowedPaths: AllowedPaths;
  stageId: string;
}

/**
 * The folder `workspace.dir` names, with symlinks followed, once it is known to be an existing folder inside one
 * the worker allows. @throws CONFIG_INVALID naming AGENT_PIPELINE_ALLOWED_PATHS, or when it is not a folder;
 *   FILE_NOT_FOUND when it does not exist; TEMPLATE_VARIABLE_UNKNOWN
 */
export async function resolveLentFolder(options: LentFolderOptions): Promise<string> {
  const { stageId } = options;
  const folder = renderLentFolder(options);
  // Resolved once and checked on that real path, which is what the run then uses: a symlink inside an allowed folder
  // that leads elsewhere is refused, and a check of one path never vouches for another.
  const real = await realpath(folder).catch((err: NodeJS.ErrnoException) => {
    throw stageFailure({ type: 'FILE_NOT_FOUND', stageId, message: `workspace.dir ${folder} does not exist (${err.code ?? 'error'}); the worker works in an existing folder and never creates it`, details: { field: 'workspace.dir', path: folder } });
  });
  checkAllowedPath(options.allowedPaths, placeOfLent(options), real, 'workspace.dir', stageId, folder);
  if (!(await stat(real)).isDirectory()) {
    throw stageFailure({ type: 'CONFIG_INVALID', stageId, message: `workspace.dir ${folder} is not a folder`, details: { field: 'workspace.dir', path: folder } });
  }
  // Its agents may make a repository there: never a run's `workspace.repo` after (lent-records.ts).
  await recordLentFolder(options.root, real);
  return real;
}

/**
 * Checks, once the run holds the folder (its agent about to start), that `workspace.dir` still leads to `checked`, the
 * real path it was checked on before the wait: replaced meanwhile by a symlink leading elsewhere, or moved, the folder
 * is refused rather than followed. @throws CONFIG_INVALID naming the folder, both paths and the fix
 */
export async function recheckLentFolder(options: LentFolderOptions, checked: string): Promise<void> {
  const folder = renderLentFolder(options);
  const now = await realpath(folder).catch((err: NodeJS.ErrnoException) => `nothing (${err.code ?? 'error'})`);
  if (now !== checked) throw changedFolderFailure(options.stageId, folder, checked, now);
  checkAllowedPath(options.allowedPaths, placeOfLent(options), now, 'workspace.dir', options.stageId, folder);
}

/**
 * At the moment of use (just before the agent starts in it): `dir`, a real path, must still be one, so that no
 * folder on its way was replaced by a symlink since it was checked. @throws CONFIG_INVALID as recheckLentFolder
 */
export async function confirmRealFolder(dir: string, stageId: string): Promise<void> {
  const now = await realpath(dir).catch((err: NodeJS.ErrnoException) => `nothing (${err.code ?? 'error'})`);
  if (now !== dir) throw changedFolderFailure(stageId, dir, dir, now);
}

function changedFolderFailure(stageId: string, folder: string, checked: string, now: string): Error {
  return stageFailure({
    type: 'CONFIG_INVALID',
    stageId,
    message: `workspace.dir ${folder} changed while the run waited for it: it was checked as ${checked} and now leads to ${now}; the run works only in the folder it checked`,
    hint: 'something replaced or moved the folder (or a folder above it) with a symlink; put the real folder back, or start the run with the folder as it is now',
    details: { field: 'workspace.dir', path: folder },
  });
}

/** `workspace.dir` filled in and made absolute (relative to the pipeline file's folder). */
function renderLentFolder(options: LentFolderOptions): string {
  const { stageId } = options;
  const rendered = withTemplateErrors(stageId, () => renderTemplate(options.dir, options.context, 'workspace.dir')).trim();
  if (rendered === '') {
    throw stageFailure({ type: 'CONFIG_INVALID', stageId, message: `workspace.dir "${options.dir}" is empty once filled`, hint: 'pass the folder, e.g. --input worktree=/path/to/worktree', details: { field: 'workspace.dir' } });
  }
  return path.resolve(options.baseDir, rendered);
}

/** The run's place, as the allowed folders are checked for it. */
function placeOfLent(options: LentFolderOptions): RunPlace {
  return { workspacesRoot: options.root, runId: options.runId, firstExecutionRunId: options.firstExecutionRunId, baseDir: options.baseDir };
}

/** Opens a run in its lent folder: the agents' folder is the lent one, the bookkeeping the run's own. */
export async function openLentFolder(options: LentFolderOptions): Promise<RunWorkspace> {
  const dir = await resolveLentFolder(options);
  const own = await openRunWorkspace(options.root, options, { lent: true });
  return { ...own, dir, lent: true };
}
