import { appendFileSync, readFileSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { resolveInside } from '../../files/inside.js';
import { workspacePath } from '../workspace/run-workspace.js';

/*
 * Stages that run at the same time share the run folder, so a file one of them writes is new to the other's
 * artifact diff as well. Each stage execution records the files its agent says it writes (the Write and Edit
 * tool calls, the API backend's answer file) as it goes, before the write happens; a stage then leaves out of
 * its artifacts the files that only a stage running alongside it claimed. Files written by shell commands
 * name no path up front: a stage running alongside still reports those too.
 */

/** One workspace-relative path per line, JSON-encoded; appended, so a killed attempt's claims stay for its retry. */
const CLAIMS_FILE = 'claims.jsonl';

/**
 * The run's log of claims, beside its stages folder: one line per claim, `[ms, "stage/execution"]`. Which executions
 * claimed since a time is then one file's read, where listing every stage's folders and statting each claims file cost
 * a stage O(stages) calls at its end (a 200-stage run: 10 ms a stage by its last, 2 s of its worker's CPU).
 */
const RUN_CLAIMS_LOG = 'claims-log.jsonl';

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

  /** `stage/execution`, as the run's log names this execution. */
  private readonly execution: string;

  /** The run's log of claims. */
  private readonly runLog: string;

  constructor(
    private readonly workspaceDir: string,
    /** The execution's bookkeeping folder: `<stages folder>/<stage>/<execution>`. */
    private readonly executionDir: string,
  ) {
    this.claimed = readClaims(path.join(executionDir, CLAIMS_FILE));
    const stageDir = path.dirname(executionDir);
    this.execution = `${path.basename(stageDir)}/${path.basename(executionDir)}`;
    this.runLog = runClaimsLog(path.dirname(stageDir));
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
    appendFileSync(this.runLog, `${JSON.stringify([Date.now(), this.execution])}\n`);
  }

  has(relative: string): boolean {
    return this.claimed.has(relative);
  }

  /**
   * Files claimed by executions of the run's other stages that claimed anything since `sinceMs`: the stages that
   * wrote while this one ran. `stagesDir` holds one folder per stage, each with one folder per execution.
   */
  static async ofOtherStages(stagesDir: string, stageId: string, sinceMs: number): Promise<Set<string>> {
    const executions = claimedSince(stagesDir, sinceMs) ?? (await scanClaimedSince(stagesDir, sinceMs));
    const found = new Set<string>();
    for (const [stage, execution] of executions) {
      if (stage === stageId) continue;
      for (const claimed of readClaims(path.join(stagesDir, stage, execution, CLAIMS_FILE))) found.add(claimed);
    }
    return found;
  }
}

function runClaimsLog(stagesDir: string): string {
  return path.join(path.dirname(stagesDir), RUN_CLAIMS_LOG);
}

/** The executions (`[stage, execution]`) the run's log says claimed since `sinceMs`; undefined when it has no log. */
function claimedSince(stagesDir: string, sinceMs: number): [string, string][] | undefined {
  let text: string;
  try {
    text = readFileSync(runClaimsLog(stagesDir), 'utf8');
  } catch {
    return undefined;
  }
  const executions = new Set<string>();
  for (const line of text.split('\n')) {
    const entry = parseLine(line);
    if (Array.isArray(entry) && typeof entry[0] === 'number' && entry[0] >= sinceMs && typeof entry[1] === 'string') executions.add(entry[1]);
  }
  // Names of our own making, but still two plain folder names each before they become a path.
  return [...executions].map((name) => name.split('/')).filter((parts): parts is [string, string] => parts.length === 2 && parts.every(isFolderName));
}

/**
 * The executions whose claims file changed since `sinceMs`, by listing every stage's folder: a run whose stages claimed
 * before the run's log existed (a worker of an earlier version began it).
 */
async function scanClaimedSince(stagesDir: string, sinceMs: number): Promise<[string, string][]> {
  const found: [string, string][] = [];
  for (const stage of await readdir(stagesDir).catch(() => [] as string[])) {
    for (const execution of await readdir(path.join(stagesDir, stage)).catch(() => [] as string[])) {
      const modified = (await stat(path.join(stagesDir, stage, execution, CLAIMS_FILE)).catch(() => undefined))?.mtimeMs;
      if (modified !== undefined && modified >= sinceMs) found.push([stage, execution]);
    }
  }
  return found;
}

const isFolderName = (name: string): boolean => name !== '' && name !== '.' && name !== '..' && !name.includes('\\');

/** A line's JSON value, or undefined for an empty line or one cut short by a crash mid-write. */
function parseLine(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
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
    const value = parseLine(line);
    if (typeof value === 'string') claims.add(value);
  }
  return claims;
}
