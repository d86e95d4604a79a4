import { readdirSync, readFileSync } from 'node:fs';

/*
 * The one reading of the process table: Linux's /proc. Elsewhere there is none, and every question about other
 * processes finds nothing. Synchronous on purpose: a hundred tiny /proc reads cost ~1 ms this way and ~10 ms as
 * promises, on every attempt's critical path (measured by the stage-latency benchmark).
 */

/** Pids of the processes alive now, this one included (none without /proc). */
export function listPids(): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  return entries.map(Number).filter((pid) => Number.isInteger(pid));
}

/**
 * The fields of `/proc/<pid>/stat` after `pid (comm)`: state, ppid, pgrp, ... (comm may hold spaces and parentheses,
 * so read after the last `)`). Undefined once the process is gone.
 */
export function readProcStat(pid: number): string[] | undefined {
  const stat = statLine(pid);
  return stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** The program a process runs (`comm`, as `ps` shows it), which changes when it execs another. Undefined once gone. */
export function readProcName(pid: number): string | undefined {
  const stat = statLine(pid);
  return stat?.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
}

/** `/proc/<pid>/stat` as read, or undefined once the process is gone. */
function statLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
}

/** Where in the kernel a process waits (`/proc/<pid>/wchan`: `0` when it runs), or undefined once gone or without /proc. */
export function readWaitChannel(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/wchan`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** Pids of the processes below `pid` (its children, theirs, …), from their parents as /proc names them. */
export function descendantsOf(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const other of listPids()) {
    const parent = Number(readProcStat(other)?.[1]);
    if (Number.isInteger(parent)) children.set(parent, [...(children.get(parent) ?? []), other]);
  }
  const found: number[] = [];
  for (let pending = [pid]; pending.length > 0; ) {
    const next = pending.flatMap((p) => children.get(p) ?? []);
    found.push(...next);
    pending = next;
  }
  return found;
}
