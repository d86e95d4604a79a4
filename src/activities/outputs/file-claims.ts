import { appendFileSync, readFileSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { resolveInside, workspacePath } from '../workspace/run-workspace.js';

/*
 * Stages that run at the same time share the run folder, so a file one of them writes is new to the other's
 * artifact diff as well. Each stage execution records the files its agent says it writes (the Write and Edit
 * tool calls, the API backend's answer file) as it goes, before the write happens; a stage then leaves out of
 * its artifacts the files that only a stage running alongside it claimed. Files written by shell commands
 * name no path up front: a stage running alongside still reports those too.
 */

/** One workspace-relative path per line, JSON-encoded; appended, so a killed attempt's claims stay for its retry. */
const CLAIMS_FILE = 'claims.jsonl';

/** The tools whose calls name the file they write, and the input field that names it. */
const WRITING_TOOLS: Record<string, string> = { Write: 'file_path', Edit: 'file_path', MultiEdit: 'file_path', NotebookEdit: 'notebook_path' };

/** The file a tool call writes, if it is one of the writing tools. */
export function fileWrittenBy(tool: string | undefined, input: unknown): string | undefined {
  const field = tool === undefined ? undefined : WRITING_TOOLS[tool];
  if (!field || input === null || typeof input !== 'object') return undefined;
  const file = (input as Record<string, unknown>)[field];
  return typeof file === 'string' && file !== '' ? file : undefined;
}

/** The files one execution of a stage (all its attempts) claimed. */
export class FileClaims {
  private readonly claimed: Set<string>;

  constructor(
    private readonly workspaceDir: string,
    /** The execution's bookkeeping folder. */
    private readonly executionDir: string,
  ) {
    this.claimed = readClaims(path.join(executionDir, CLAIMS_FILE));
  }

  /** Records that the agent writes `file` (absolute, or relative to the workspace); paths outside it are ignored. */
  add(file: string): void {
    const full = resolveInside(this.workspaceDir, file);
    if (!full) return;
    const relative = workspacePath(this.workspaceDir, full);
    if (this.claimed.has(relative)) return;
    this.claimed.add(relative);
    // Synchronous, so the claim is on disk before the tool that writes the file runs; one small line per write call.
    appendFileSync(path.join(this.executionDir, CLAIMS_FILE), `${JSON.stringify(relative)}\n`);
  }

  has(relative: string): boolean {
    return this.claimed.has(relative);
  }

  /**
   * Files claimed by executions of the run's other stages that claimed anything since `sinceMs`: the stages that
   * wrote while this one ran. `stagesDir` holds one folder per stage, each with one folder per execution.
   */
  static async ofOtherStages(stagesDir: string, stageId: string, sinceMs: number): Promise<Set<string>> {
    const found = new Set<string>();
    const stages = await readdir(stagesDir).catch(() => [] as string[]);
    for (const stage of stages.filter((s) => s !== stageId)) {
      const executions = await readdir(path.join(stagesDir, stage)).catch(() => [] as string[]);
      for (const execution of executions) {
        const file = path.join(stagesDir, stage, execution, CLAIMS_FILE);
        const modified = (await stat(file).catch(() => undefined))?.mtimeMs;
        if (modified === undefined || modified < sinceMs) continue;
        for (const claimed of readClaims(file)) found.add(claimed);
      }
    }
    return found;
  }
}

function readClaims(file: string): Set<string> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return new Set();
  }
  const claims = new Set<string>();
  for (const line of text.split('\n')) {
    try {
      const value: unknown = JSON.parse(line);
      if (typeof value === 'string') claims.add(value);
    } catch {
      // An empty line, or one cut short by a crash mid-write.
    }
  }
  return claims;
}
