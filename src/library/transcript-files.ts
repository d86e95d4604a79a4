import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { isRealDir } from '../activities/workspace/own-files.js';
import { OLD_BOOKKEEPING_DIR, runPaths } from '../activities/workspace/run-folder.js';
import type { RunRef } from '../pipeline/run-state.js';

/** One saved attempt transcript of a stage. */
export interface TranscriptFile {
  file: string;
  /** Review round (1 the first time the stage ran). */
  round: number;
  /** The Temporal activity of the execution; each review round or person-requested retry is a new one. */
  execution: string;
  /** Temporal attempt within the execution (1-based). */
  attempt: number;
}

/** Where a run's stage keeps its bookkeeping: `<workspaces root>/.agent-pipeline/runs/<run folder>/stages/<stage>`. */
export function stageFolder(workspacesRoot: string, run: RunRef, stageId: string): string {
  return path.join(runPaths(workspacesRoot, run).bookkeeping, 'stages', stageId);
}

/**
 * Where a stage kept its bookkeeping in releases before the worker's own folder: inside the run's folder
 * (`<workspace>/.agent-pipeline/stages/<stage>`), where its agent could write. Read only, and only through real
 * folders: `undefined` when a folder on the way is a symlink or missing.
 */
export async function oldStageFolder(workspace: string, stageId: string): Promise<string | undefined> {
  let dir = workspace;
  for (const part of [OLD_BOOKKEEPING_DIR, 'stages', stageId]) {
    dir = path.join(dir, part);
    if (!(await isRealDir(dir))) return undefined;
  }
  return dir;
}

/**
 * Every transcript of a stage, oldest first: `<stage folder>/round-<R>-<activity>-<run>/attempt-<N>.jsonl`
 * (one folder per execution of the stage, Temporal's attempts inside it).
 */
export async function listTranscripts(folder: string): Promise<TranscriptFile[]> {
  const executions = await readdir(folder, { withFileTypes: true }).catch(() => []);
  const found: TranscriptFile[] = [];
  for (const entry of executions) {
    const match = /^round-(\d+)-(.+)-[^-]+$/.exec(entry.name);
    if (!entry.isDirectory() || !match) continue;
    // Regular files only (a Dirent says what the entry itself is: a symlink is never taken for its target).
    for (const file of await readdir(path.join(folder, entry.name), { withFileTypes: true }).catch(() => [])) {
      const attempt = /^attempt-(\d+)\.jsonl$/.exec(file.name)?.[1];
      if (attempt && file.isFile()) found.push({ file: path.join(folder, entry.name, file.name), round: Number(match[1]), execution: match[2], attempt: Number(attempt) });
    }
  }
  const byNumber = (a: string, b: string): number => (Number(a) - Number(b)) || a.localeCompare(b);
  return found.sort((a, b) => a.round - b.round || byNumber(a.execution, b.execution) || a.attempt - b.attempt);
}
