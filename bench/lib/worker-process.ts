import { createWriteStream, existsSync } from 'node:fs';
import { execa, type ResultPromise } from 'execa';
import { elapsedMs } from './stats.js';

/**
 * What `node dist/worker.js` logs on stderr once `Worker.create` has returned and it starts polling: its own
 * line (plain text or JSON, depending on the version), or the SDK's "Worker state changed … RUNNING".
 */
const POLLING_LINE = /agent-pipeline worker polling|"state":"RUNNING"/;
const SETPRIV = '/usr/bin/setpriv';

/** Options of {@link spawnWorker}. */
export interface WorkerProcessOptions {
  /** The built entry point, `dist/worker.js`. */
  workerScript: string;
  /** The worker's whole environment (TEMPORAL_ADDRESS, AGENT_PIPELINE_TASK_QUEUE, ...). */
  env: NodeJS.ProcessEnv;
  /** Where the worker's stdout and stderr go. */
  logFile: string;
  /** Extra arguments for `node` before the script, e.g. `--max-old-space-size`. */
  nodeArgs?: string[];
  /** How long to wait for the polling line. @unit milliseconds @default 60_000 */
  readyTimeoutMs?: number;
}

/** A worker running as its own process, as in production. */
export interface WorkerProcess {
  readonly pid: number;
  /** Time from spawn to the polling line. @unit milliseconds */
  readonly readyMs: number;
  /** Wall-clock time of the spawn. @unit milliseconds since the epoch */
  readonly spawnedAt: number;
  /** Resolves when the process has exited. */
  readonly exited: Promise<void>;
  /** Sends `signal` and waits for the exit; SIGKILL after `graceMs`. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

/**
 * Spawns `node dist/worker.js` and resolves once it says it polls. The process gets SIGKILL if this one
 * dies (`setpriv --pdeathsig`), so an interrupted benchmark leaves no worker behind.
 * @throws Error when the worker exits or stays silent for `readyTimeoutMs`, with the tail of its log
 */
export async function spawnWorker(options: WorkerProcessOptions): Promise<WorkerProcess> {
  const log = createWriteStream(options.logFile, { flags: 'a' });
  const args = [...(options.nodeArgs ?? []), options.workerScript];
  const [file, fileArgs] = existsSync(SETPRIV) ? [SETPRIV, ['--pdeathsig', 'KILL', '--', process.execPath, ...args]] : [process.execPath, args];
  const startNs = process.hrtime.bigint();
  const spawnedAt = Date.now();
  const child: ResultPromise = execa(file, fileArgs, {
    env: options.env,
    extendEnv: false,
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
    buffer: false,
    reject: false,
  });
  child.stdout?.pipe(log, { end: false });
  let tail = '';
  const exited = child.then(() => undefined);
  const readyMs = await new Promise<number>((resolve, reject) => {
    const timeoutMs = options.readyTimeoutMs ?? 60_000;
    const timer = setTimeout(() => reject(new Error(`worker ${child.pid} did not log that it polls within ${timeoutMs} ms; see ${options.logFile}`)), timeoutMs);
    child.stderr?.on('data', (chunk: Buffer) => {
      log.write(chunk);
      tail = `${tail}${chunk.toString()}`.slice(-2_000);
      if (POLLING_LINE.test(tail)) {
        clearTimeout(timer);
        resolve(elapsedMs(startNs));
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      const reason = tail.split('\n').find((line) => /error/i.test(line))?.trim() ?? tail.trim().split('\n').at(-1);
      reject(new Error(`worker exited before polling: ${reason ?? '(no output)'}; full log ${options.logFile}`));
    });
  });
  void exited.then(() => log.end());
  return {
    pid: child.pid!,
    readyMs,
    spawnedAt,
    exited,
    async stop(signal = 'SIGTERM', graceMs = 10_000) {
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}
