import { realpath } from 'node:fs/promises';
import path from 'node:path';
import type { ContextFile } from '../../pipeline/schema.js';
import { stageFailure } from '../failures.js';
import { readFileExcerpt, type FileExcerpt } from './file-excerpt.js';
import { PipelineFileError, pipelineFileFailure, resolvePipelineFile } from './pipeline-file.js';

/*
 * The pipeline's `context:` files. Most are the pipeline's own (read from its folder, or the run's bundle); an entry
 * with `from: workspace` is read from the run's workspace when each attempt starts, so a shared folder
 * (`workspace.dir`) gives every run the context as it is now. Either way the path must stay inside its folder after
 * following symlinks, only regular files are read, and each read is capped.
 */

/** One context file as read for a prompt. */
export interface ContextFileRead {
  /** As the pipeline names it. */
  path: string;
  excerpt: FileExcerpt;
}

/** Where the context files are read from. */
export interface ContextFolders {
  /** The pipeline's folder (or the run's bundle). */
  pipelineDir: string;
  /** The run's workspace, for `from: workspace`. */
  workspaceDir: string;
}

/**
 * Reads each entry with at most `nextLimit()` bytes (after `count` of those before); a missing optional one becomes a
 * note. @throws FILE_NOT_FOUND for a file that cannot be read; CONFIG_INVALID for one outside its folder or not a file
 */
export async function readContextFiles(
  entries: readonly ContextFile[],
  folders: ContextFolders,
  stageId: string,
  budget: { nextLimit: () => number; count: (excerpt: FileExcerpt) => void },
  notes: string[],
): Promise<ContextFileRead[]> {
  const found: ContextFileRead[] = [];
  for (const entry of entries) {
    const { path: relative, optional = false, from = 'pipeline' } = typeof entry === 'string' ? { path: entry } : entry;
    // The workspace by its real path now (the pipeline's folder is real already): each read checks it stays that.
    const root = from === 'workspace' ? await realpath(folders.workspaceDir) : folders.pipelineDir;
    const where = from === 'workspace' ? "the run's workspace" : "the pipeline's folder";
    const file = path.resolve(root, relative);
    // Checked again as opened (`root`): between the check on its path and the open, a stage running alongside may
    // have swapped the file for a symlink (a sandboxed command looping renames put the worker's 0600 key in the prompt).
    const read = async (): Promise<FileExcerpt> => readFileExcerpt(await resolvePipelineFile(root, relative), budget.nextLimit(), root);
    const excerpt = await read().catch((err: NodeJS.ErrnoException) => {
      if ((err instanceof PipelineFileError && err.reason === 'refused') || err.code === 'EOUTSIDE') {
        const message = from === 'workspace' ? new PipelineFileError(`${file} leads outside the run's workspace ${root}; a context file is read only from inside it`, 'refused') : new PipelineFileError(err.message, 'refused');
        throw pipelineFileFailure(message, { stageId, field: 'context', relative, file, label: 'context file' });
      }
      if (err.code === 'ENOTREG') throw stageFailure({ type: 'CONFIG_INVALID', stageId, message: `context file ${file} (\`context: ${relative}\`) is not a regular file`, details: { field: 'context', path: file } });
      if (optional && err.code === 'ENOENT') return undefined;
      throw stageFailure({
        type: 'FILE_NOT_FOUND',
        stageId,
        message: `cannot read context file ${file} (\`context: ${relative}\` in ${where}, ${err.code ?? 'error'})`,
        details: { field: 'context', path: file },
      });
    });
    if (!excerpt) {
      notes.push(`The optional context file ${relative} does not exist; no such context is available, so work without it.`);
      continue;
    }
    budget.count(excerpt);
    found.push({ path: relative, excerpt });
  }
  return found;
}

/** `{{context}}`: the text of the context files read, one after the other, separated by a blank line. */
export function contextText(files: readonly ContextFileRead[]): string {
  return files.filter((f) => !f.excerpt.binary).map((f) => f.excerpt.text).join('\n\n');
}
