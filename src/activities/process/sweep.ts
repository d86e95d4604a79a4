import { readFileSync } from 'node:fs';
import { listPids } from './proc.js';

/*
 * Finds and stops processes by a marker variable in their environment. The CLI gets the markers and
 * every tool process it starts inherits them, even the Bash tools that run in their own session and
 * so escape a kill of the CLI's process group. Linux only (/proc); elsewhere nothing is found. `stop.ts`
 * stops what is found.
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
  // `environ` is NUL-separated `NAME=value` entries: match a whole entry, not the tail of another.
  const wanted = Buffer.from(`\0${name}=${value}${match === 'exact' ? '\0' : ''}`);
  const found: number[] = [];
  // Synchronous on purpose, as proc.ts explains.
  for (const pid of listPids()) {
    if (pid === process.pid) continue;
    try {
      const environ = readFileSync(`/proc/${pid}/environ`);
      if (Buffer.concat([NUL, environ, NUL]).includes(wanted)) found.push(pid);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found.sort((a, b) => a - b);
}
