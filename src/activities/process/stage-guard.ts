import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { writeFileAtomic } from '../workspace/run-workspace.js';
import { STAGE_MARKER } from './sweep.js';
import { stopMarkedProcesses } from './stop.js';

/*
 * One agent per stage at a time. Each attempt marks its agent `AGENT_PIPELINE_STAGE=<stage folder>#<attempt
 * token>`, and every tool process the agent starts inherits the mark. The stage's lock file names the
 * agent's pid from its start until all the attempt's processes are gone. Before an attempt starts its
 * agent, if a lock file is there, whatever any earlier attempt of the same stage left running (any
 * token) is stopped. When the attempt ends it stops its own leftovers only (a
 * server a Bash tool started in the background), so that an attempt that learns late that it was
 * replaced cannot touch its successor.
 */

/** The lock file in the stage's bookkeeping folder. */
const LOCK_FILE = 'agent.lock';

interface LockContent {
  pid: number;
  host: string;
  attempt: number;
  marker: string;
  startedAt: string;
}

/** A stage's claim on its folder for one attempt; see the module comment. */
export class StageGuard {
  private constructor(
    private readonly stageDir: string,
    /** The value of `AGENT_PIPELINE_STAGE` for this attempt's agent. */
    readonly marker: string,
    /** What was found and stopped before the attempt, for the stage's warnings. */
    readonly warnings: string[],
    /** Between SIGTERM and SIGKILL for what is stopped. @unit milliseconds */
    private readonly graceMs: number,
  ) {}

  /**
   * Stops earlier attempts' processes still working in the stage, so that the new attempt is the only one.
   * `marker` is the one a warm process for this stage was started with, so that the attempt can adopt it.
   */
  static async claim(stageDir: string, graceMs: number, marker?: string): Promise<StageGuard> {
    await mkdir(stageDir, { recursive: true });
    const guard = new StageGuard(stageDir, marker ?? `${stageDir}#${randomUUID()}`, [], graceMs);
    const lockFile = path.join(stageDir, LOCK_FILE);
    // Without a lock file no earlier attempt can have left anything here: an attempt writes it as soon as its agent
    // exists and removes it only once all its processes are gone. Skipping the /proc sweep then takes a few ms off
    // every attempt's critical path (measured by the stage-latency benchmark).
    if (!existsSync(lockFile)) return guard;
    const lock = await readLock(lockFile);
    if (lock && lock.host !== hostname()) {
      guard.warnings.push(`the lock of attempt ${lock.attempt} names pid ${lock.pid} on host ${lock.host}, which this worker cannot check; that worker stops it when its heartbeat fails`);
    }
    // The marker, not the lock's pid, decides what is killed: a pid alone may have been reused since.
    // SIGTERM first, so that a tool of the earlier attempt can release its locks before the new agent needs them.
    const { stopped } = await stopMarkedProcesses(STAGE_MARKER, `${stageDir}#`, 'prefix', graceMs);
    if (stopped.length > 0) {
      const agent = lock && stopped.includes(lock.pid) ? `the agent of attempt ${lock.attempt} (pid ${lock.pid}) and ` : '';
      guard.warnings.push(`stopped ${agent}${stopped.length} process(es) an earlier attempt left running in this stage (pids ${stopped.join(', ')})`);
    }
    return guard;
  }

  /** Records the agent's pid in the stage's lock file. */
  async lock(pid: number, attempt: number): Promise<void> {
    const content: LockContent = { pid, host: hostname(), attempt, marker: this.marker, startedAt: new Date().toISOString() };
    await writeFileAtomic(path.join(this.stageDir, LOCK_FILE), `${JSON.stringify(content)}\n`);
  }

  /**
   * Stops what this attempt left running (SIGTERM, grace, SIGKILL; nothing waits when nothing is left) and removes
   * the lock if it is still this attempt's. A process that survived SIGKILL keeps the lock, so that the next attempt
   * sweeps the stage again.
   */
  async release(): Promise<void> {
    const { survivors } = await stopMarkedProcesses(STAGE_MARKER, this.marker, 'exact', this.graceMs);
    const file = path.join(this.stageDir, LOCK_FILE);
    if (survivors.length === 0 && (await readLock(file))?.marker === this.marker) await rm(file, { force: true });
  }
}

async function readLock(file: string): Promise<LockContent | undefined> {
  try {
    const value = JSON.parse(await readFile(file, 'utf8')) as Partial<LockContent>;
    if (typeof value.pid !== 'number' || typeof value.host !== 'string') return undefined;
    return { pid: value.pid, host: value.host, attempt: value.attempt ?? 0, marker: value.marker ?? '', startedAt: value.startedAt ?? '' };
  } catch {
    return undefined;
  }
}
