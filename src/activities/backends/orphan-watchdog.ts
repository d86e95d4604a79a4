import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { WORKER_MARKER } from './process-sweep.js';

/*
 * Agents must not outlive the worker that started them. `setpriv --pdeathsig KILL` takes care of the
 * CLI itself, but the Bash tools it starts run in their own session and are reparented to init when
 * the worker is killed with SIGKILL, so nothing in the worker can reach them any more.
 *
 * So each worker process starts one small watchdog: a separate `node` in its own session, whose stdin
 * is a pipe from the worker. Only the worker holds the write end; when the worker dies, however it
 * dies, the kernel closes it, the watchdog reads end-of-file and SIGKILLs every process that carries
 * this worker's marker, then exits. Sweeping before the next attempt (`stage-guard.ts`) remains as
 * the second line, for what a watchdog cannot see (a watchdog killed along with the worker).
 *
 * The watchdog is inline JavaScript rather than a module file so it runs the same from `dist/` and
 * from the TypeScript sources under test. It repeats `killMarkedProcesses` from process-sweep.ts in
 * plain JS; keep the two in step.
 */
const WATCHDOG_SOURCE = `
const fs = require('node:fs');
const [name, value] = process.argv.slice(1);
const wanted = Buffer.from('\\0' + name + '=' + value + '\\0');
const nul = Buffer.from([0]);
function sweep() {
  let killed = 0;
  for (const entry of fs.readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (Buffer.concat([nul, fs.readFileSync('/proc/' + pid + '/environ'), nul]).includes(wanted)) {
        process.kill(pid, 'SIGKILL');
        killed++;
      }
    } catch {}
  }
  return killed;
}
function finish() {
  let rounds = 0;
  const again = () => { if (sweep() > 0 && ++rounds < 20) setTimeout(again, 50); else process.exit(0); };
  again();
}
process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});
process.stdin.on('end', finish);
process.stdin.on('error', finish);
process.stdin.resume();
`;

const token = `${process.pid}-${randomUUID()}`;
let watchdog: ChildProcess | undefined;

/**
 * The marker of this worker process's agents (`AGENT_PIPELINE_WORKER=<token>`), (re)starting the
 * watchdog when it is not running. Without /proc (not Linux) there is no watchdog, and the marker does nothing.
 */
export function workerMarkerValue(): string {
  const running = watchdog && watchdog.exitCode === null && watchdog.signalCode === null;
  if (!running && process.platform === 'linux') watchdog = startWatchdog(token);
  return token;
}

function startWatchdog(value: string): ChildProcess {
  const child = spawn(process.execPath, ['-e', WATCHDOG_SOURCE, WORKER_MARKER, value], {
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
