import { setTimeout as sleep } from 'node:timers/promises';
import { listPids, readProcName, readProcStat } from './proc.js';
import { findMarkedProcesses, type MarkerMatch } from './sweep.js';

/*
 * Stopping is always SIGTERM, a grace period, then SIGKILL. A tool killed outright leaves its locks behind
 * (git's index.lock, pyenv's shim lock that every Bash tool call of every agent on the host takes), and every later
 * agent then waits on them. With SIGTERM first, a shell runs its EXIT trap and git rolls back its lock.
 *
 * The clean path costs nothing: when nothing is left to stop, nothing waits; when everything exits on SIGTERM, the
 * wait ends as soon as it has (polled every {@link POLL_MS}), not when the grace runs out.
 */

/** Default time between SIGTERM and SIGKILL (`AGENT_PIPELINE_KILL_GRACE`). @unit milliseconds */
export const DEFAULT_KILL_GRACE_MS = 5_000;
/** How often the processes being stopped are looked for again. @unit milliseconds */
const POLL_MS = 50;
/** How long SIGKILL is kept at after the grace (a dying shell may still start a child). @unit milliseconds */
const KILL_TIMEOUT_MS = 5_000;

/** What a stop did. */
export interface StopReport {
  /** Pids that were sent SIGTERM or SIGKILL. */
  stopped: number[];
  /** Pids that were still alive after the grace and got SIGKILL. */
  killed: number[];
  /** Processes still alive when it gave up; normally none. */
  survivors: number[];
}

/** Options of {@link stopGracefully}. */
export interface StopOptions {
  /**
   * SIGTERM the processes without a live child among them first, and a parent only once its children have gone (or
   * half the grace has passed). A shell runs its EXIT trap only after its foreground child ends, and a sandbox
   * (bubblewrap's `--die-with-parent`) SIGKILLs everything inside it the moment the agent above it exits: stopped all
   * at once, a sandboxed tool would lose its clean-up to that race. @default false
   */
  leavesFirst?: boolean;
}

/**
 * Stops the processes `find` returns (looked up again and again, so children started meanwhile are caught):
 * SIGTERM to each, up to `graceMs` for them to exit, then SIGKILL to what is left until none is. Returns at once
 * when `find` finds nothing.
 */
export async function stopGracefully(find: () => number[] | Promise<number[]>, graceMs: number, options: StopOptions = {}): Promise<StopReport> {
  const alive = async (): Promise<number[]> => (await find()).filter((pid) => !isGone(pid));
  const stopped = new Set<number>();
  const killed = new Set<number>();
  // What each pid ran when it got SIGTERM: a process that has exec'd since (a shell's child forked before it runs its
  // program) is a new program that never saw the signal, or lost it in the fork's window; it gets SIGTERM too.
  const termed = new Map<number, string | undefined>();
  const signal = (pids: number[], name: NodeJS.Signals): void => {
    for (const pid of pids) {
      const program = name === 'SIGTERM' ? readProcName(pid) : undefined;
      try {
        process.kill(pid, name);
        if (name === 'SIGTERM') termed.set(pid, program);
        else killed.add(pid);
        stopped.add(pid);
      } catch {
        // Already gone.
      }
      // An agent frozen when its worker died (spawn-agent.ts) acts on SIGTERM only once it runs again; a process that
      // ended on the SIGTERM is gone by now, so this one may find nobody.
      if (name === 'SIGTERM') resume(pid);
    }
  };
  const newcomer = (pid: number): boolean => !termed.has(pid) || termed.get(pid) !== readProcName(pid);
  const report = (survivors: number[]): StopReport => ({ stopped: [...stopped], killed: [...killed], survivors });
  let pids = await alive();
  if (pids.length === 0) return report([]);
  const graceEnd = Date.now() + graceMs;
  const leavesUntil = options.leavesFirst ? Date.now() + graceMs / 2 : 0;
  while (pids.length > 0 && Date.now() < graceEnd) {
    // Only newcomers get SIGTERM: a second one could cut short the clean-up the first one started.
    const due = Date.now() < leavesUntil ? withoutLiveChildren(pids) : pids;
    signal(due.filter(newcomer), 'SIGTERM');
    await sleep(Math.min(POLL_MS, Math.max(1, graceEnd - Date.now())));
    pids = await alive();
  }
  const killEnd = Date.now() + KILL_TIMEOUT_MS;
  while (pids.length > 0) {
    if (Date.now() > killEnd) return report(pids);
    signal(pids, 'SIGKILL');
    await sleep(POLL_MS);
    pids = await alive();
  }
  return report([]);
}

/** SIGCONT to `pid`, if it is still there. */
function resume(pid: number): void {
  try {
    process.kill(pid, 'SIGCONT');
  } catch {
    // Already gone.
  }
}

/** The pids of `pids` that are no other one's parent. */
function withoutLiveChildren(pids: readonly number[]): number[] {
  const parents = new Set(pids.map((pid) => Number(readProcStat(pid)?.[1])));
  return pids.filter((pid) => !parents.has(pid));
}

/** Stops every process whose environment holds the marker `name=value` (see sweep.ts), gracefully, leaves first. */
export function stopMarkedProcesses(name: string, value: string, match: MarkerMatch, graceMs: number, options: StopOptions = {}): Promise<StopReport> {
  return stopGracefully(() => findMarkedProcesses(name, value, match), graceMs, { leavesFirst: true, ...options });
}

/** Pids of the live members of process group `pgid`, read from /proc (none elsewhere). */
export function listProcessGroup(pgid: number): number[] {
  return listPids().filter((pid) => readProcStat(pid)?.[2] === String(pgid));
}

/** Gone, or a zombie: killed but not reaped yet, so it does nothing any more. */
export function isGone(pid: number): boolean {
  const fields = readProcStat(pid);
  if (fields) return fields[0] === 'Z';
  if (process.platform === 'linux') return true;
  // Without /proc: signal 0 says whether the pid exists.
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}
