import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { stageFailure } from '../failures.js';

/**
 * Reads a file a pipeline names (agent, step template, system prompt), relative to the pipeline
 * file's folder.
 * @throws FILE_NOT_FOUND naming the absolute path, the field that named it and the system's error code
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
    return { file, text: await readFile(file, 'utf8') };
  } catch (err) {
    throw stageFailure({
      type: 'FILE_NOT_FOUND',
      stageId,
      message: `cannot read ${label} ${file} (\`${field}: ${relative}\`, ${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      details: { field, path: file },
    });
  }
}
