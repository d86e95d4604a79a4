import { createHash } from 'node:crypto';
import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { agentFrontmatterSchema, splitFrontmatter } from '../pipeline/agent-frontmatter.js';
import { listAgentReferences, listReferencedFiles } from '../pipeline/referenced-files.js';
import type { RunBundle, RunBundleSummary } from '../pipeline/run-bundle.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import { ConfigError, InvalidRequestError } from '../errors.js';
import { isInside } from '../files/inside.js';
import { readRegularFile, RegularFileError } from '../files/regular-file.js';
import { hashManifest } from './manifest-hash.js';

/**
 * Client side of "runs that carry their own files": reads the pipeline file and every file it references into a
 * {@link RunBundle} for the workflow's start input. Workers read the files from the bundle (see
 * `activities/prompt/run-bundle-files.ts`), so the client's folder may change or vanish once the run has started.
 */

/** Bundles above this fail at `start`; Temporal refuses a start input above 2 MiB. @unit bytes @default 1 MiB */
export const DEFAULT_BUNDLE_MAX_BYTES = 1024 * 1024;
/** The variable that sets the cap. */
export const BUNDLE_MAX_BYTES_VARIABLE = 'AGENT_PIPELINE_BUNDLE_MAX_BYTES';

/** Thrown when the bundle is larger than the cap; the message names the largest files. Code `BUNDLE_TOO_LARGE`. */
export class BundleTooLargeError extends InvalidRequestError {
  override readonly name = 'BundleTooLargeError';
  constructor(message: string) {
    super('BUNDLE_TOO_LARGE', message);
  }
}

export interface CreateRunBundleOptions {
  /** @unit bytes @default {@link DEFAULT_BUNDLE_MAX_BYTES} */
  maxBytes?: number;
  /**
   * The pipeline's text when no file holds it (a definition built in code): bundled as `pipelineFile`, whose folder
   * the definition's paths are relative to, instead of reading that file.
   */
  pipelineText?: string;
  /** How messages name the pipeline (`<definition NAME>`). @default `pipelineFile` */
  label?: string;
}

/** How a library caller and a CLI user each say "read the files on the worker". */
const WORKER_FILES_HINT = 'start with --files-from-worker (the library: `filesFromWorker: true`)';

const PIPELINE_FILE_FIELD = '(the pipeline file)';

/** One file to bundle: its absolute path and the field that named it (for messages). */
interface Wanted {
  file: string;
  field: string;
  /** A missing optional file (an agent's reference) is left out; the worker warns as it always has. */
  optional: boolean;
}

/**
 * Reads the pipeline file and every file it names (agent files and their `references`, step files, `context`,
 * `systemPrompt`) into a content-addressed bundle.
 * @throws InvalidRequestError naming the field and the path when a file cannot be read (`FILE_NOT_FOUND`), is not a
 *   regular file (`FILE_UNREADABLE`), leads outside the folder (`PATH_OUTSIDE`) or is given as an absolute path
 *   (`PATH_ABSOLUTE`); BundleTooLargeError above the cap
 */
export async function createRunBundle(pipelineFile: string, pipeline: PipelineDefinition, options: CreateRunBundleOptions = {}): Promise<RunBundle> {
  const baseDir = path.dirname(path.resolve(pipelineFile));
  const contents = new Map<string, Buffer>();
  if (options.pipelineText !== undefined) contents.set(path.resolve(pipelineFile), Buffer.from(options.pipelineText, 'utf8'));
  const label = options.label ?? pipelineFile;
  const maxBytes = options.maxBytes ?? DEFAULT_BUNDLE_MAX_BYTES;
  const read = async (wanted: Wanted): Promise<Buffer | undefined> => {
    const known = contents.get(wanted.file);
    if (known) return known;
    const inside = wanted.field !== PIPELINE_FILE_FIELD;
    if (inside) await checkInsideFolder(baseDir, wanted, label);
    try {
      // Checked again on the file as opened (no wait on a FIFO, a regular file, inside the folder): what the path led
      // to at the check may have been swapped since; and never more than the whole bundle may hold.
      const data = await readRegularFile(wanted.file, { follow: true, maxBytes, ...(inside ? { inside: baseDir } : {}) });
      contents.set(wanted.file, data);
      return data;
    } catch (err) {
      if (wanted.optional) return undefined;
      throw bundleReadError(err, wanted, label, maxBytes, baseDir);
    }
  };

  await read({ file: path.resolve(pipelineFile), field: PIPELINE_FILE_FIELD, optional: false });
  for (const reference of listReferencedFiles(pipeline)) {
    const file = resolveRelative(baseDir, reference.path, reference.field, label);
    const data = await read({ file, field: reference.field, optional: reference.optional ?? false });
    if (reference.kind === 'agent file' && data) {
      for (const ref of listAgentReferences(reference.field, readAgentReferences(data))) {
        await read({ file: resolveRelative(path.dirname(file), ref.path, ref.field, label), field: ref.field, optional: true });
      }
    }
  }
  return assembleBundle(baseDir, contents, maxBytes, pipeline.name);
}

/** The small record of a bundle for the run's memo and `status`. */
export function summarizeBundle(bundle: RunBundle): RunBundleSummary {
  const bytes = Object.values(bundle.blobs).reduce((sum, blob) => sum + Buffer.byteLength(blob.data, blob.encoding === 'base64' ? 'base64' : 'utf8'), 0);
  return { hash: bundle.hash, files: Object.keys(bundle.files).length, bytes };
}

/** The cap from `AGENT_PIPELINE_BUNDLE_MAX_BYTES`. @throws ConfigError for anything but a positive whole number */
export function bundleMaxBytesFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const text = env[BUNDLE_MAX_BYTES_VARIABLE];
  if (text === undefined || text === '') return DEFAULT_BUNDLE_MAX_BYTES;
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) {
    throw new ConfigError(`[CONFIG_INVALID] ${BUNDLE_MAX_BYTES_VARIABLE}=${text} is not a whole number of bytes above 0; unset it for the default ${DEFAULT_BUNDLE_MAX_BYTES}`);
  }
  return value;
}

/**
 * Refuses a file outside the pipeline file's folder, by its path (`../`) or where a symlink leads: a pipeline from a
 * repository one does not control must not carry `~/.ssh/…` into the run's history. A missing file is left to the read.
 * @throws InvalidRequestError `PATH_OUTSIDE` naming the field, the file and where it leads
 */
async function checkInsideFolder(baseDir: string, wanted: Wanted, pipelineFile: string): Promise<void> {
  if (isInside(baseDir, wanted.file)) {
    const [realBase, realFile] = await Promise.all([realpath(baseDir), realpath(wanted.file).catch(() => undefined)]);
    if (!realFile || isInside(realBase, realFile)) return;
    throw outsideError(baseDir, wanted, pipelineFile, realFile);
  }
  throw outsideError(baseDir, wanted, pipelineFile);
}

function outsideError(baseDir: string, wanted: Wanted, pipelineFile: string, real?: string): InvalidRequestError {
  return new InvalidRequestError(
    'PATH_OUTSIDE',
    `[PATH_OUTSIDE] \`${wanted.field}\` in ${pipelineFile} names ${wanted.file}${real ? `, a symlink to ${real},` : ''} outside the pipeline's folder ${baseDir}; ` +
      'a run carries only files in that folder or below it: move the file there',
  );
}

/** The error for a file that could not be bundled, naming it, the field, what was wrong and the fix. */
function bundleReadError(err: unknown, wanted: Wanted, pipelineFile: string, maxBytes: number, baseDir: string): Error {
  const at = `${wanted.file} (\`${wanted.field}\` in ${pipelineFile})`;
  if (err instanceof RegularFileError && err.code === 'EOUTSIDE') return outsideError(baseDir, wanted, pipelineFile);
  if (err instanceof RegularFileError && err.code === 'EFBIG') {
    return new BundleTooLargeError(
      `[BUNDLE_TOO_LARGE] ${at} is ${formatBytes(err.bytes ?? 0)}, above the cap of ${formatBytes(maxBytes)} for the whole bundle; ` +
        `make it smaller, raise ${BUNDLE_MAX_BYTES_VARIABLE} (Temporal refuses a start input above 2 MiB), or ${WORKER_FILES_HINT} and deploy the files with the workers`,
    );
  }
  if (err instanceof RegularFileError) {
    return new InvalidRequestError('FILE_UNREADABLE', `[FILE_UNREADABLE] cannot bundle ${at}: it is not a regular file (a folder, a device or a FIFO); name a file`);
  }
  return new InvalidRequestError(
    'FILE_NOT_FOUND',
    `[FILE_NOT_FOUND] cannot bundle ${at}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}; ` +
      `fix the path, or ${WORKER_FILES_HINT} if the workers have the file`,
  );
}

/** A bundled run resolves every path under the bundle, so an absolute path (a place on the client) cannot be carried. */
function resolveRelative(dir: string, relative: string, field: string, pipelineFile: string): string {
  if (path.isAbsolute(relative)) {
    throw new InvalidRequestError(
      'PATH_ABSOLUTE',
      `[PATH_ABSOLUTE] \`${field}: ${relative}\` in ${pipelineFile} is an absolute path, which a run cannot carry to a worker on another host; ` +
        `write it relative to the file that names it, or ${WORKER_FILES_HINT} if every worker has it`,
    );
  }
  return path.resolve(dir, relative);
}

/** An agent file's `references`; an unreadable frontmatter names none (the worker reports it when the stage runs). */
function readAgentReferences(data: Buffer): string[] | undefined {
  try {
    const parsed = agentFrontmatterSchema.safeParse(splitFrontmatter(data.toString('utf8')).frontmatter);
    return parsed.success ? parsed.data.references : undefined;
  } catch {
    return undefined;
  }
}

function assembleBundle(baseDir: string, contents: Map<string, Buffer>, maxBytes: number, pipelineName: string): RunBundle {
  const root = commonFolder([baseDir, ...[...contents.keys()].map((file) => path.dirname(file))]);
  const files: Record<string, string> = {};
  const blobs: RunBundle['blobs'] = {};
  const sizes = new Map<string, number>();
  for (const [file, data] of contents) {
    const sha = createHash('sha256').update(data).digest('hex');
    files[toBundlePath(path.relative(root, file))] = sha;
    if (blobs[sha]) continue;
    const text = data.toString('utf8');
    blobs[sha] = Buffer.from(text, 'utf8').equals(data) ? { encoding: 'utf8', data: text } : { encoding: 'base64', data: data.toString('base64') };
    sizes.set(file, data.length);
  }
  const total = [...sizes.values()].reduce((a, b) => a + b, 0);
  if (total > maxBytes) {
    const largest = [...sizes].sort((a, b) => b[1] - a[1]).slice(0, 5).map(([file, bytes]) => `${file} (${formatBytes(bytes)})`);
    throw new BundleTooLargeError(
      `[BUNDLE_TOO_LARGE] the files of pipeline ${pipelineName} come to ${formatBytes(total)}, above the cap of ${formatBytes(maxBytes)}; largest: ${largest.join(', ')}. ` +
        `Make them smaller, raise ${BUNDLE_MAX_BYTES_VARIABLE} (Temporal refuses a start input above 2 MiB), or ${WORKER_FILES_HINT} and deploy the files with the workers`,
    );
  }
  const pipelineDir = toBundlePath(path.relative(root, baseDir));
  return { hash: hashManifest(pipelineDir, files), pipelineDir, files, blobs };
}

/** The deepest folder that holds all of `folders` (absolute). */
function commonFolder(folders: string[]): string {
  let common = folders[0].split(path.sep);
  for (const folder of folders.slice(1)) {
    const parts = folder.split(path.sep);
    let i = 0;
    while (i < common.length && i < parts.length && common[i] === parts[i]) i++;
    common = common.slice(0, i);
  }
  return common.join(path.sep) || path.sep;
}

function toBundlePath(relative: string): string {
  return relative.split(path.sep).join('/');
}

function formatBytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(2)} MiB` : `${(bytes / 1024).toFixed(1)} KiB`;
}
