import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/*
 * Finds and stops processes by a marker variable in their environment. The CLI gets the markers and
 * every tool process it starts inherits them, even the Bash tools that run in their own session and
 * so escape a kill of the CLI's process group. Linux only (/proc); elsewhere nothing is found.
 */

/** Set on each agent to `<stage bookkeeping folder>#<attempt token>`: which attempt of which stage of which run it works for. */
export const STAGE_MARKER = 'AGENT_PIPELINE_STAGE';
/** Set on each agent to a token of the worker process that started it (see `orphan-watchdog.ts`). */
export const WORKER_MARKER = 'AGENT_PIPELINE_WORKER';

const NUL = Buffer.from([0]);

/** How a marker's value is matched: whole, or as the beginning of the value. */
export type MarkerMatch = 'exact' | 'prefix';

/** Pids of the processes whose environment holds `name=value` (this process excluded). */
export async function findMarkedProcesses(name: string, value: string, match: MarkerMatch = 'exact'): Promise<number[]> {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  // `environ` is NUL-separated `NAME=value` entries: match a whole entry, not the tail of another.
  const wanted = Buffer.from(`\0${name}=${value}${match === 'exact' ? '\0' : ''}`);
  const found: number[] = [];
  // Synchronous on purpose: a hundred tiny /proc reads cost ~1 ms this way and ~10 ms as promises,
  // on every attempt's critical path (measured by the stage-latency benchmark).
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const environ = readFileSync(`/proc/${pid}/environ`);
      if (Buffer.concat([NUL, environ, NUL]).includes(wanted)) found.push(pid);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found.sort((a, b) => a - b);
}

/** How long {@link killMarkedProcesses} keeps at it. @unit milliseconds */
const KILL_TIMEOUT_MS = 5_000;

/** What {@link killMarkedProcesses} did. */
export interface KillReport {
  /** Pids it sent SIGKILL. */
  stopped: number[];
  /** Marked processes still alive when it gave up (after {@link KILL_TIMEOUT_MS}); normally none. */
  survivors: number[];
}

/**
 * Sends SIGKILL to every process marked `name=value` until none is left (a dying shell may still have
 * started a child), and waits for them to be gone.
 */
export async function killMarkedProcesses(name: string, value: string, match: MarkerMatch = 'exact'): Promise<KillReport> {
  const stopped = new Set<number>();
  const deadline = Date.now() + KILL_TIMEOUT_MS;
  for (;;) {
    const pids = (await findMarkedProcesses(name, value, match)).filter((pid) => !isZombie(pid));
    if (pids.length === 0) return { stopped: [...stopped], survivors: [] };
    if (Date.now() > deadline) return { stopped: [...stopped], survivors: pids };
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
        stopped.add(pid);
      } catch {
        // Already gone.
      }
    }
    await sleep(50);
  }
}

/** A killed process whose parent has not reaped it yet still shows in /proc, but does nothing; gone counts too. */
function isZombie(pid: number): boolean {
  let stat: string;
  try {
    // Synchronous on purpose: called only for the few marked pids.
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return true;
  }
  // `pid (comm) S ...`: comm may hold spaces and parentheses; the state follows the last `)`.
  const close = stat.lastIndexOf(')');
  return stat.charAt(close + 2) === 'Z';
}
