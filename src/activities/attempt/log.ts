import { readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { StageResult, TokenUsage } from '../../pipeline/stage-result.js';
import { snapshotFiles, writeFileAtomic, type FileSnapshot } from '../workspace/run-workspace.js';

/** The file of a completed attempt's result that waits for its end checkpoint. */
const UNCHECKPOINTED_RESULT = 'uncheckpointed-result.json';

/** How an earlier attempt of the same stage execution failed. */
export interface AttemptFailure {
  attempt: number;
  /** Catalogue type, e.g. `OUTPUT_CONTRACT_VIOLATION`. */
  type: string;
  message: string;
  /** The agent session the attempt used, so the next one can continue it. */
  sessionId?: string;
  /** What the execution spent up to and including this attempt, from the failure's details. @unit US dollars */
  costUsd?: number;
  usage?: TokenUsage;
  /** Warnings of this attempt and the ones before it, carried on to the execution's result. */
  warnings?: string[];
  /** @unit milliseconds since the epoch */
  at: number;
}

/**
 * The on-disk memory of one execution of a stage (one activity, all its Temporal attempts): the
 * files that existed before its first attempt, each attempt's transcript, and how attempts failed.
 * Temporal does not tell an attempt why the previous one failed; this folder does, on any worker
 * that sees the workspace.
 */
export class AttemptLog {
  private constructor(
    /** The execution's folder inside the stage's bookkeeping folder. */
    readonly dir: string,
    private failures: AttemptFailure[],
  ) {}

  static async open(dir: string): Promise<AttemptLog> {
    const failures = await readJson<AttemptFailure[]>(path.join(dir, 'failures.json'));
    return new AttemptLog(dir, Array.isArray(failures) ? failures : []);
  }

  /** Where attempt `attempt` keeps its transcript. */
  transcriptPath(attempt: number): string {
    return path.join(this.dir, `attempt-${attempt}.jsonl`);
  }

  /** The recorded failure of the attempt before `attempt`, if it recorded one. */
  failureBefore(attempt: number): AttemptFailure | undefined {
    return this.failures.find((f) => f.attempt === attempt - 1);
  }

  /** The recorded failures of the attempts before `attempt`, oldest first. */
  failuresBefore(attempt: number): AttemptFailure[] {
    return this.failures.filter((f) => f.attempt < attempt).sort((a, b) => a.attempt - b.attempt);
  }

  /**
   * What `{{previous.failed}}` says: empty on the first attempt, the previous attempt's failure
   * message, or that it stopped without reporting (worker killed, heartbeat or start-to-close timeout). `carried`: how
   * the last attempt ended as the workflow saw it, when the execution moved from a worker whose log is not here.
   */
  previousFailureMessage(attempt: number, carried?: string): string {
    if (attempt <= 1) return '';
    return (
      this.failureBefore(attempt)?.message ??
      carried ??
      `attempt ${attempt - 1} stopped before it finished (its worker stopped, or it timed out)`
    );
  }

  /** How many attempts so far broke the output contract. */
  countFailures(type: string): number {
    return this.failures.filter((f) => f.type === type).length;
  }

  async recordFailure(failure: AttemptFailure): Promise<void> {
    this.failures = [...this.failures.filter((f) => f.attempt !== failure.attempt), failure];
    await writeFileAtomic(path.join(this.dir, 'failures.json'), JSON.stringify(this.failures, null, 2));
  }

  /**
   * Keeps the result of an attempt whose stage completed but whose end checkpoint no store took: the next attempt
   * on this host writes the checkpoint and returns it, instead of running the agent again (run-stage.ts).
   */
  async keepUncheckpointedResult(result: StageResult): Promise<void> {
    await writeFileAtomic(path.join(this.dir, UNCHECKPOINTED_RESULT), JSON.stringify(result));
  }

  /** The result {@link keepUncheckpointedResult} kept, removed from the folder; undefined when there is none. */
  async takeUncheckpointedResult(): Promise<StageResult | undefined> {
    const file = path.join(this.dir, UNCHECKPOINTED_RESULT);
    const result = await readJson<StageResult>(file);
    await rm(file, { force: true });
    return result !== null && typeof result === 'object' ? result : undefined;
  }

  /**
   * The files that existed before the execution's first attempt, and when they were recorded. Kept on
   * disk so that a retried attempt still reports what an earlier, killed attempt wrote.
   */
  async baseline(workspaceDir: string): Promise<{ files: FileSnapshot; takenAtMs: number }> {
    const file = path.join(this.dir, 'baseline.json');
    const saved = await readJson<[string, { bytes: number; mtimeMs: number; link?: string }][]>(file);
    if (Array.isArray(saved)) return { files: new Map(saved), takenAtMs: (await stat(file)).mtimeMs };
    const takenAtMs = Date.now();
    const files = await snapshotFiles(workspaceDir);
    await writeFileAtomic(file, JSON.stringify([...files]));
    return { files, takenAtMs };
  }
}

async function readJson<T>(file: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}
