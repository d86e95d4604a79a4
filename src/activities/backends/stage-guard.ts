import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { writeFileAtomic } from '../workspace.js';
import { killMarkedProcesses, STAGE_MARKER } from './process-sweep.js';

/*
 * One agent per stage at a time. Each attempt marks its agent `AGENT_PIPELINE_STAGE=<stage folder>#<attempt
 * token>`, and every tool process the agent starts inherits the mark. Before an attempt starts its
 * agent, whatever any earlier attempt of the same stage left running (any token) is stopped, and the
 * stage's lock file names the agent's pid. When the attempt ends it stops its own leftovers only (a
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
  ) {}

  /** Stops earlier attempts' processes still working in the stage, so that the new attempt is the only one. */
  static async claim(stageDir: string): Promise<StageGuard> {
    await mkdir(stageDir, { recursive: true });
    const warnings: string[] = [];
    const lock = await readLock(path.join(stageDir, LOCK_FILE));
    if (lock && lock.host !== hostname()) {
      warnings.push(`the lock of attempt ${lock.attempt} names pid ${lock.pid} on host ${lock.host}, which this worker cannot check; that worker stops it when its heartbeat fails`);
    }
    // The marker, not the lock's pid, decides what is killed: a pid alone may have been reused since.
    const leftovers = await killMarkedProcesses(STAGE_MARKER, `${stageDir}#`, 'prefix');
    if (leftovers.length > 0) {
      const agent = lock && leftovers.includes(lock.pid) ? `the agent of attempt ${lock.attempt} (pid ${lock.pid}) and ` : '';
      warnings.push(`stopped ${agent}${leftovers.length} process(es) an earlier attempt left running in this stage (pids ${leftovers.join(', ')})`);
    }
    return new StageGuard(stageDir, `${stageDir}#${randomUUID()}`, warnings);
  }

  /** Records the agent's pid in the stage's lock file. */
  async lock(pid: number, attempt: number): Promise<void> {
    const content: LockContent = { pid, host: hostname(), attempt, marker: this.marker, startedAt: new Date().toISOString() };
    await writeFileAtomic(path.join(this.stageDir, LOCK_FILE), `${JSON.stringify(content)}\n`);
  }

  /** Stops what this attempt left running and removes the lock if it is still this attempt's. */
  async release(): Promise<void> {
    await killMarkedProcesses(STAGE_MARKER, this.marker);
    const file = path.join(this.stageDir, LOCK_FILE);
    if ((await readLock(file))?.marker === this.marker) await rm(file, { force: true });
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
