import { readdirSync, readFileSync, writeFileSync } from 'node:fs';

/*
 * Memory and process-tree readings from Linux's /proc. Reads are synchronous and small: a sample of the
 * whole tree costs about a millisecond, so sampling every 100 ms barely disturbs what it measures.
 */

/** Resident memory of one process. @unit kibibytes */
export interface ProcessMemory {
  /** VmRSS: resident now. */
  rssKb: number;
  /** VmHWM: the resident peak since start or since {@link resetPeakRss}. */
  hwmKb: number;
}

/** VmRSS and VmHWM of `pid`, or `undefined` when it has exited. */
export function readMemory(pid: number): ProcessMemory | undefined {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const field = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
  return { rssKb: field('VmRSS'), hwmKb: field('VmHWM') };
}

/** Resets VmHWM to the current RSS (`echo 5 > /proc/PID/clear_refs`), so a later peak is the peak of what follows. */
export function resetPeakRss(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/** Every live process's parent, from /proc/PID/stat. */
function readParents(): Map<number, number> {
  const parents = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // The command name may hold spaces and parentheses; fields after the last ')' are fixed.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parents.set(Number(name), Number(fields[1]));
    } catch {
      // Exited while we read.
    }
  }
  return parents;
}

/** `root` and all its descendants. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const [pid, ppid] of readParents()) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  const tree: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    tree.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return tree;
}

/** The command line of `pid` as its arguments, or `[]` when it has exited. */
function readCommandLine(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

/** Whether `pid` runs Claude Code (`…/claude` or the package's `claude.exe`; setpriv has exec'd into it by then). */
export function isAgentProcess(pid: number): boolean {
  return /\/claude(\.exe)?$/.test(readCommandLine(pid)[0] ?? '');
}

/** Summed RSS of `pids` (those still alive). @unit kibibytes */
export function sumRssKb(pids: readonly number[]): number {
  return pids.reduce((sum, pid) => sum + (readMemory(pid)?.rssKb ?? 0), 0);
}

/** Calls `read` every `intervalMs` and keeps the largest value until stopped. */
export class PeakSampler {
  private peak = 0;
  private samples = 0;
  private stopped = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly read: () => number,
    intervalMs = 100,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
  }

  private sample(): void {
    this.peak = Math.max(this.peak, this.read());
    this.samples += 1;
  }

  /** Takes a last sample, stops, and returns the peak and how many samples it saw; later calls return the same. */
  stop(): { peak: number; samples: number } {
    if (this.stopped) return { peak: this.peak, samples: this.samples };
    this.stopped = true;
    this.sample();
    clearInterval(this.timer);
    return { peak: this.peak, samples: this.samples };
  }
}

/** CPU time a process has used: its own, and its reaped children's (an agent's time lands in the worker that waited for it). @unit milliseconds */
export interface CpuTime {
  selfMs: number;
  childrenMs: number;
}

const TICK_MS = 10; // USER_HZ is 100 on Linux; /proc/PID/stat counts in these ticks

/** CPU time of `pid` from /proc/PID/stat (utime, stime, cutime, cstime), or zeros when it has exited. */
export function readCpuTime(pid: number): CpuTime {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
    // After the command name: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
    return { selfMs: (fields[11] + fields[12]) * TICK_MS, childrenMs: (fields[13] + fields[14]) * TICK_MS };
  } catch {
    return { selfMs: 0, childrenMs: 0 };
  }
}
