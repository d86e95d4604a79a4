import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { INTERNAL_DIR } from '../activities/workspace/run-folder.js';

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

/** Where a run's stage keeps its bookkeeping: `<workspace>/.agent-pipeline/stages/<stage>`. */
export function stageFolder(workspace: string, stageId: string): string {
  return path.join(workspace, INTERNAL_DIR, 'stages', stageId);
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
    for (const name of await readdir(path.join(folder, entry.name)).catch(() => [])) {
      const attempt = /^attempt-(\d+)\.jsonl$/.exec(name)?.[1];
      if (attempt) found.push({ file: path.join(folder, entry.name, name), round: Number(match[1]), execution: match[2], attempt: Number(attempt) });
    }
  }
  const byNumber = (a: string, b: string): number => (Number(a) - Number(b)) || a.localeCompare(b);
  return found.sort((a, b) => a.round - b.round || byNumber(a.execution, b.execution) || a.attempt - b.attempt);
}
