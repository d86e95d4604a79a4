import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { isInside } from '../../files/inside.js';
import { stageFailure } from '../failures.js';
import type { AllowedPaths } from '../workspace/allowed-paths.js';

/*
 * Runs that carry no bundle (`start --files-from-worker`, or anything started through Temporal with that input shape)
 * name a folder of the worker's host, `baseDir`, from which the worker reads their agent, prompt, context and system
 * prompt files. Whoever can start a run chooses that folder: `baseDir: /etc` with `context: [passwd]` sent the
 * worker's password file to the model. The worker reads pipelines from its own disk only inside the folders its
 * operator lists, checked on real paths (symlinks followed) when an attempt opens the folder; each read then checks
 * again that the folder is still that real path and that the file stays inside it (pipeline-file.ts).
 */

/** The variable that lists them, separated like PATH (`:` on Linux and macOS), or `*` for any folder. */
export const PIPELINE_DIRS_VARIABLE = 'AGENT_PIPELINE_PIPELINE_DIRS';

/** Any folder (one person's own machine), or these folders and what is below them; none refuses every such run. */
export type PipelineDirs = AllowedPaths;


/**
 * Why a run without a bundle may not read its files from `baseDir` on this worker, and the fix, or nothing when it
 * may: `baseDir`, with symlinks followed, must lie in a listed folder. A folder that does not exist is judged by its
 * path (the stage that reads it reports it missing).
 */
export async function findWorkerFilesProblem(dirs: PipelineDirs, baseDir: string): Promise<WorkerFilesProblem | undefined> {
  const named = path.resolve(baseDir);
  return problemOf(dirs, named, await realOrSelf(named));
}

/** A refusal: what is wrong (naming the folder and the setting), and how to fix it. */
export interface WorkerFilesProblem {
  message: string;
  hint: string;
}

async function problemOf(dirs: PipelineDirs, named: string, real: string): Promise<WorkerFilesProblem | undefined> {
  if (dirs === 'any') return undefined;
  for (const dir of dirs) if (isInside(await realOrSelf(dir), real)) return undefined;
  const where = real === named ? '' : ` (which leads to ${real})`;
  const listed = dirs.length > 0 ? `it reads pipelines only from ${dirs.join(', ')}` : `${PIPELINE_DIRS_VARIABLE} is not set, so it reads none from its own disk`;
  return {
    message: `the run carries no files (--files-from-worker) and names ${named}${where} as its pipeline's folder (baseDir), a folder this worker does not read pipelines from: ${listed}`,
    hint: `start the run without --files-from-worker (its files then travel in the run), or add the folder to ${PIPELINE_DIRS_VARIABLE} on every worker of the task queue (folders separated by "${path.delimiter}")`,
  };
}

/**
 * The real path of a run's `baseDir` on this worker, once it is known to be an existing folder inside a listed one:
 * the folder the attempt reads its pipeline files from. @throws CONFIG_INVALID naming baseDir, the setting and the fix;
 *   FILE_NOT_FOUND when the folder is not on this worker
 */
export async function openWorkerPipelineFolder(dirs: PipelineDirs, baseDir: string, stageId: string): Promise<string> {
  const folder = path.resolve(baseDir);
  const real = await realpath(folder).catch((err: NodeJS.ErrnoException) => {
    throw stageFailure({
      type: 'FILE_NOT_FOUND',
      stageId,
      message: `the run reads its files from ${folder} on the worker (--files-from-worker), which is not on this worker (${err.code ?? 'error'})`,
      hint: 'start the run without --files-from-worker (its files then travel in the run), or put the pipeline folder at the same path on every worker',
      details: { field: 'baseDir', path: folder },
    });
  });
  const problem = await problemOf(dirs, folder, real);
  if (problem) throw stageFailure({ type: 'CONFIG_INVALID', stageId, ...problem, details: { field: 'baseDir', path: folder } });
  if (!(await stat(real)).isDirectory()) throw stageFailure({ type: 'CONFIG_INVALID', stageId, message: `the run's pipeline folder ${folder} on the worker is not a folder`, details: { field: 'baseDir', path: folder } });
  return real;
}

async function realOrSelf(folder: string): Promise<string> {
  return realpath(folder).catch(() => path.resolve(folder));
}
