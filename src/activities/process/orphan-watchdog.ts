import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { DEFAULT_KILL_GRACE_MS } from './stop.js';
import { WORKER_MARKER } from './sweep.js';

/*
 * Agents must not outlive the worker that started them. `setpriv --pdeathsig STOP` freezes the CLI itself when the
 * worker dies (spawn-agent.ts says why it is not stopped outright), but the Bash tools it starts run in their own
 * session and are reparented to init when the worker is killed with SIGKILL, so nothing in the worker can reach them
 * any more.
 *
 * So each worker process starts one small watchdog: a separate `node` in its own session, whose stdin
 * is a pipe from the worker. Only the worker holds the write end; when the worker dies, however it
 * dies, the kernel closes it, the watchdog reads end-of-file and stops every process that carries this
 * worker's marker the way everything is stopped here (`stop.ts`): SIGTERM to all of them, leaves first, so that a
 * tool can release its locks (each SIGTERM followed by SIGCONT, which wakes the frozen CLI), up to the grace period
 * for them to exit, then SIGKILL to what is left; then it exits. It ignores SIGTERM and SIGINT and has no
 * parent-death signal, so it lives through both steps. Sweeping before the next attempt (`stage-guard.ts`) remains
 * as the second line, for what a watchdog cannot see (a watchdog killed along with the worker, whose frozen CLI then
 * waits there for that sweep).
 *
 * The watchdog is inline JavaScript rather than a module file so it runs the same from `dist/` and
 * from the TypeScript sources under test. It repeats `stopGracefully` from stop.ts in plain JS;
 * keep the two in step.
 */
const WATCHDOG_SOURCE = `
const fs = require('node:fs');
const [name, value, grace] = process.argv.slice(1);
const graceMs = Number(grace) || 0;
const wanted = Buffer.from('\\0' + name + '=' + value + '\\0');
const nul = Buffer.from([0]);
function marked() {
  const pids = [];
  for (const entry of fs.readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (!Buffer.concat([nul, fs.readFileSync('/proc/' + pid + '/environ'), nul]).includes(wanted)) continue;
      const stat = fs.readFileSync('/proc/' + pid + '/stat', 'utf8');
      if (stat.charAt(stat.lastIndexOf(')') + 2) !== 'Z') pids.push(pid);
    } catch {}
  }
  return pids;
}
function parentOf(pid) {
  try {
    const stat = fs.readFileSync('/proc/' + pid + '/stat', 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return 0;
  }
}
function signal(pids, name) {
  for (const pid of pids) { try { process.kill(pid, name); } catch {} }
}
let finishing = false;
function finish() {
  if (finishing) return;
  finishing = true;
  const termed = new Set();
  const graceEnd = Date.now() + graceMs;
  let rounds = 0;
  const kill = () => {
    const pids = marked();
    if (pids.length === 0 || ++rounds > 100) process.exit(0);
    signal(pids, 'SIGKILL');
    setTimeout(kill, 50);
  };
  const leavesUntil = Date.now() + graceMs / 2;
  const term = () => {
    const pids = marked();
    if (pids.length === 0) process.exit(0);
    if (Date.now() >= graceEnd) return kill();
    const parents = new Set(pids.map(parentOf));
    const due = Date.now() < leavesUntil ? pids.filter((pid) => !parents.has(pid)) : pids;
    const fresh = due.filter((pid) => !termed.has(pid));
    signal(fresh, 'SIGTERM');
    signal(fresh, 'SIGCONT');
    for (const pid of fresh) termed.add(pid);
    setTimeout(term, 50);
  };
  term();
}
process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});
process.on('SIGHUP', () => {});
process.stdin.on('end', finish);
process.stdin.on('error', finish);
process.stdin.resume();
`;

const token = `${process.pid}-${randomUUID()}`;
let watchdog: ChildProcess | undefined;

/**
 * The marker of this worker process's agents (`AGENT_PIPELINE_WORKER=<token>`), (re)starting the
 * watchdog when it is not running. Without /proc (not Linux) there is no watchdog, and the marker does nothing.
 * @param graceMs between the watchdog's SIGTERM and SIGKILL (the first call's value holds while the watchdog runs)
 */
export function workerMarkerValue(graceMs: number = DEFAULT_KILL_GRACE_MS): string {
  const running = watchdog && watchdog.exitCode === null && watchdog.signalCode === null;
  if (!running && process.platform === 'linux') watchdog = startWatchdog(token, graceMs);
  return token;
}

function startWatchdog(value: string, graceMs: number): ChildProcess {
  const child = spawn(process.execPath, ['-e', WATCHDOG_SOURCE, WORKER_MARKER, value, String(graceMs)], {
    // Its own session: a Ctrl-C to the worker's terminal or a kill of its process group spares it.
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
    env: { PATH: process.env.PATH ?? '' },
  });
  child.on('error', () => {
    // No watchdog: the sweep before the next attempt still stops leftovers, and the next attempt tries again.
    if (watchdog === child) watchdog = undefined;
  });
  // Neither the process nor the pipe keeps the worker alive; the pipe closes when the worker exits.
  child.unref();
  const pipe = child.stdin as Socket | null;
  pipe?.on('error', () => {});
  pipe?.unref();
  return child;
}
