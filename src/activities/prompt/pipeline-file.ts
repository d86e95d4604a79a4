import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { readRegularFile, RegularFileError } from '../../files/regular-file.js';
import { isStrictlyInside } from '../../files/inside.js';
import { stageFailure } from '../failures.js';

/*
 * The files a pipeline names (agent, step template, context, system prompt, an agent's references) are read only from
 * inside the pipeline file's folder: the run's unpacked bundle, or for `--files-from-worker` runs the folder on the
 * worker's host. The path is checked after following symlinks, the file must be a regular file (never a device, a
 * FIFO or a folder), and its size is capped: a run cannot make the worker read `/etc/passwd`, `/dev/zero` or a 64 MB
 * "persona" into a prompt and its history.
 */

/** The most a pipeline file may hold. @unit bytes @default 1 MiB */
export const MAX_PIPELINE_FILE_BYTES = 1024 * 1024;

/** Why a pipeline file cannot be read: `missing` (ENOENT and the like) or `refused` (outside, not a file, too large). */
export class PipelineFileError extends Error {
  override readonly name = 'PipelineFileError';
  constructor(
    message: string,
    readonly reason: 'missing' | 'refused',
    readonly code?: string,
  ) {
    super(message);
  }
}

/**
 * The real path of `relative` (taken from `from`, by default `root`), when it lies inside `root` after following
 * symlinks. `root` is the folder's real path as the attempt checked it (the run's bundle, a folder the worker lists for
 * runs without one, the run's workspace): read now, it must still be that path.
 * @throws PipelineFileError `refused` when it leads outside, or the folder changed; `missing` when it does not exist
 */
export async function resolvePipelineFile(root: string, relative: string, from = root): Promise<string> {
  const file = path.resolve(from, relative);
  let real: string;
  let realRoot: string;
  try {
    [realRoot, real] = await Promise.all([realpath(root), realpath(file)]);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new PipelineFileError(`${file} cannot be read (${code ?? 'error'})`, 'missing', code);
  }
  // The folder was checked on its real path; one that now leads elsewhere (a folder on its way swapped for a
  // symlink since) would vouch for files nobody checked.
  if (realRoot !== path.resolve(root)) {
    throw new PipelineFileError(`the folder ${root} now leads to ${realRoot}: it changed since the run checked it, and a run reads only from the folder it checked`, 'refused');
  }
  if (!isStrictlyInside(realRoot, real)) {
    throw new PipelineFileError(`${file} is outside the pipeline's folder ${root}${real === file ? '' : ` (it leads to ${real})`}; a run reads only files in its pipeline's folder`, 'refused');
  }
  return real;
}

/**
 * Reads a pipeline file as UTF-8 once {@link resolvePipelineFile} has placed it, checking it is a regular file of at
 * most `maxBytes`. @throws PipelineFileError naming the file, its size and the cap
 */
export async function readPipelineText(root: string, relative: string, from = root, maxBytes = MAX_PIPELINE_FILE_BYTES): Promise<{ file: string; text: string }> {
  const file = path.resolve(from, relative);
  const real = await resolvePipelineFile(root, relative, from);
  // Checked on the file as opened, not on its path again: opening a FIFO would wait for a writer, reading a device would
  // never end, and a folder on the way swapped for a symlink since the check would lead out.
  const data = await readRegularFile(real, { follow: true, inside: root, maxBytes }).catch((err: unknown) => {
    if (!(err instanceof RegularFileError)) throw err;
    if (err.code === 'ENOTREG') throw new PipelineFileError(`${file} is not a regular file`, 'refused');
    if (err.code === 'EFBIG') throw new PipelineFileError(`${file} is ${err.bytes} bytes, more than the cap of ${maxBytes} bytes for a pipeline file`, 'refused');
    throw new PipelineFileError(`${file} is outside the pipeline's folder ${root}; a run reads only files in its pipeline's folder`, 'refused');
  });
  return { file, text: data.toString('utf8') };
}

/**
 * Reads a file a pipeline names (agent, step template, system prompt), relative to the pipeline file's folder.
 * @throws FILE_NOT_FOUND naming the absolute path, the field that named it and the system's error code;
 *   CONFIG_INVALID when it leads outside the folder, is not a regular file or is above the cap
 */
export async function readPipelineFile(
  baseDir: string,
  relative: string,
  stageId: string,
  field: string,
  label = `${field} file`,
): Promise<{ file: string; text: string }> {
  const file = path.resolve(baseDir, relative);
  try {
    return await readPipelineText(baseDir, relative);
  } catch (err) {
    throw pipelineFileFailure(err, { stageId, field, relative, file, label });
  }
}

/** The stage failure for a pipeline file that could not be read: FILE_NOT_FOUND, or CONFIG_INVALID when it was refused. */
export function pipelineFileFailure(err: unknown, at: { stageId: string; field: string; relative: string; file: string; label: string }): Error {
  if (err instanceof PipelineFileError && err.reason === 'refused') {
    return stageFailure({ type: 'CONFIG_INVALID', stageId: at.stageId, message: `cannot read ${at.label} (\`${at.field}: ${at.relative}\`): ${err.message}`, details: { field: at.field, path: at.file } });
  }
  const code = err instanceof PipelineFileError ? err.code : (err as NodeJS.ErrnoException).code;
  return stageFailure({
    type: 'FILE_NOT_FOUND',
    stageId: at.stageId,
    message: `cannot read ${at.label} ${at.file} (\`${at.field}: ${at.relative}\`, ${code ?? 'error'})`,
    details: { field: at.field, path: at.file },
  });
}
