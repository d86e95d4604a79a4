import { existsSync } from 'node:fs';
import { execa, type ResultPromise } from 'execa';
import type { AttemptProgress } from '../stage-backend.js';
import type { CliEventReader } from './events.js';
import { listProcessGroup, stopMarkedProcesses, type StopReport } from '../../process/stop.js';
import { StdoutLineSplitter, type StdoutPiece } from './stream-lines.js';
import type { TranscriptWriter } from './transcript-writer.js';

/**
 * util-linux's setpriv lets the kernel stop the agent when the worker dies without cleaning up. TERM, not KILL, so
 * that the CLI can end its tools; the worker's watchdog SIGKILLs whatever is left after the grace.
 */
const SETPRIV = '/usr/bin/setpriv';
const NEWLINE = Buffer.from('\n');
/** Kept of the CLI's stderr, for failure details. @unit characters */
const STDERR_TAIL = 4_000;
/** Least time between two heartbeats prompted by partial-message deltas. @unit milliseconds */
const DELTA_HEARTBEAT_GAP_MS = 1_000;

/** One run of the `claude` process. */
export interface CliProcessOptions {
  binary: string;
  args: string[];
  /** The prompt, written to stdin, which is then closed. */
  stdin: string;
  cwd: string;
  env: Record<string, string>;
  reader: CliEventReader;
  transcript: TranscriptWriter;
  /** Longest silence allowed once the agent has produced output. @unit milliseconds */
  stallTimeoutMs: number;
  /** Longest wait for the agent's first output. @unit milliseconds */
  firstOutputTimeoutMs: number;
  /** Between SIGTERM and SIGKILL when the agent is stopped. @unit milliseconds */
  killGraceMs: number;
  /**
   * The environment marker every process of this agent carries (`AGENT_PIPELINE_STAGE=<value>`): a stop reaches the
   * Bash tools too, which run in sessions of their own, out of reach of the process group.
   */
  marker?: { name: string; value: string };
  /** Heartbeats also go out this often while the agent is quiet (a long tool run), so a live worker is never taken for dead. @unit milliseconds */
  heartbeatIntervalMs: number;
  signal: AbortSignal;
  heartbeat(progress: AttemptProgress): void;
  /** Called once the process exists, with its pid (also its process group id). */
  onSpawn(pid: number): Promise<void>;
  /** A warm process spawned earlier with the same command line, waiting on stdin: it gets the prompt instead of a new spawn. */
  spawned?: ResultPromise;
  /**
   * Asked when the agent's `result` event arrives: whether the attempt may settle on it instead of waiting for the
   * process to exit. The result then comes back at once with `exit` set, and the process finishes (or is stopped when
   * it stalls) in the background.
   */
  settleOnResult?: (reader: CliEventReader) => boolean;
}

/** How the process ended. */
export interface CliProcessResult {
  exitCode?: number;
  /** The signal that ended it, e.g. `SIGTERM`. */
  exitSignal?: string;
  /** Why we stopped it, if we did. */
  stoppedFor?: 'cancelled' | 'stalled';
  /** The error code when it could not be started (`ENOENT`, `EACCES`). */
  spawnError?: string;
  stderrTail: string;
  /** Size of the largest assistant or result event whose text had to be cut to its tail. @unit bytes */
  truncatedAnswerBytes: number;
  /** Set when the attempt settled on the result before the process exited: how it exited, once it has. */
  exit?: Promise<CliProcessResult>;
}

/**
 * Runs `claude` in its own process group, streams stdout into the transcript and the event reader,
 * heartbeats, and stops the agent when it stalls or the attempt is cancelled: SIGTERM to the group and every
 * marked process, SIGKILL after the grace period to what is left. Resolves when the process has exited, or at its
 * result event when `settleOnResult` allows.
 */
export async function runCliProcess(o: CliProcessOptions): Promise<CliProcessResult> {
  const [file, fileArgs] = existsSync(SETPRIV) ? [SETPRIV, ['--pdeathsig', 'TERM', '--', o.binary, ...o.args]] : [o.binary, o.args];
  // An adopted warm process has started up already; writing its prompt and closing stdin is all that is left.
  if (o.spawned) {
    // A process that died while it waited makes the write fail with EPIPE; its exit is what the attempt reports.
    o.spawned.stdin?.on('error', () => {});
    o.spawned.stdin?.end(o.stdin);
  }
  const child = o.spawned ?? execa(file, fileArgs, {
    cwd: o.cwd,
    input: o.stdin,
    env: o.env,
    extendEnv: false,
    // Its own process group, so a stop reaches the CLI and the tools it started in that group together.
    detached: true,
    buffer: false,
    reject: false,
  });
  const result: CliProcessResult = { stderrTail: '', truncatedAnswerBytes: 0 };
  let exited = false;
  let killTimer: NodeJS.Timeout | undefined;
  const killGroup = (signal: NodeJS.Signals): void => {
    // Once the process has exited its pid may be reused: never signal it then.
    if (exited || !child.pid) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      // Already gone.
    }
  };
  let stopping: Promise<StopReport | undefined> | undefined;
  const terminate = (): void => {
    if (stopping || killTimer) return;
    // SIGTERM to the agent and every tool at once, so that each can clean up (release its locks) within the grace;
    // the group's members, the agent among them, get no second SIGTERM from the marker sweep.
    const group = !exited && child.pid ? listProcessGroup(child.pid) : [];
    killGroup('SIGTERM');
    stopping = o.marker
      ? stopMarkedProcesses(o.marker.name, o.marker.value, 'exact', o.killGraceMs, { alreadyTerminated: group }).catch(() => undefined)
      : Promise.resolve(undefined);
    killTimer = setTimeout(() => killGroup('SIGKILL'), o.killGraceMs);
  };
  const stop = (why: 'cancelled' | 'stalled'): void => {
    if (result.stoppedFor) return;
    result.stoppedFor = why;
    terminate();
  };
  const onAbort = (): void => stop('cancelled');
  o.signal.addEventListener('abort', onAbort, { once: true });
  if (o.signal.aborted) stop('cancelled');

  // Stall detection follows the agent's output, not the wall clock: a long but active stage is never stopped.
  let stallTimer: NodeJS.Timeout | undefined;
  const armStallTimer = (): void => {
    clearTimeout(stallTimer);
    stallTimer = setTimeout(() => stop('stalled'), o.reader.sawOutput ? o.stallTimeoutMs : o.firstOutputTimeoutMs);
  };
  armStallTimer();
  let lastBeatAt = 0;
  // Set once the attempt settled on the agent's result (`settleOnResult`): the activity completes, and from then on
  // nobody reads its heartbeats.
  let settled = false;
  const beat = (): void => {
    if (settled) return;
    lastBeatAt = Date.now();
    o.heartbeat(o.reader.progress());
  };
  const beatTimer = setInterval(beat, o.heartbeatIntervalMs);
  let settleOnResult = (): void => {};
  const resultSettled = new Promise<'result'>((resolve) => {
    settleOnResult = () => {
      settled = true;
      clearInterval(beatTimer);
      resolve('result');
    };
  });

  const stderr = collectTail(child.stderr);
  const handle = async (piece: StdoutPiece): Promise<void> => {
    if (piece.kind === 'long-bytes') return o.transcript.write(piece.chunk);
    let event: unknown;
    const text = piece.kind === 'line' ? piece.raw.toString('utf8') : piece.skeleton;
    try {
      event = text === undefined ? undefined : JSON.parse(text);
    } catch {
      event = undefined;
    }
    const type = (event as { type?: unknown } | undefined)?.type;
    // Partial-message deltas only feed stall detection: the `assistant` event after them holds the same text.
    if (piece.kind === 'line' && type !== 'stream_event') {
      await o.transcript.write(piece.raw);
      await o.transcript.write(NEWLINE);
    }
    if (piece.kind === 'long-line' && piece.truncatedStrings > 0 && (type === 'assistant' || type === 'result')) {
      result.truncatedAnswerBytes = Math.max(result.truncatedAnswerBytes, piece.bytes);
    }
    if (o.reader.read(event)) armStallTimer();
    if (type === 'result' && o.settleOnResult?.(o.reader)) settleOnResult();
    // Deltas come by the hundred per answer and add nothing the next whole event does not carry; each heartbeat
    // call converts its details to a payload, so they only prompt one now and then.
    if (type !== 'stream_event' || Date.now() - lastBeatAt >= DELTA_HEARTBEAT_GAP_MS) beat();
  };

  const finished = (async (): Promise<CliProcessResult> => {
    let failure: unknown;
    try {
      if (child.pid) await o.onSpawn(child.pid);
      const splitter = new StdoutLineSplitter();
      for await (const chunk of (child.stdout ?? []) as AsyncIterable<Buffer>) {
        for (const piece of splitter.push(chunk)) await handle(piece);
      }
      for (const piece of splitter.end()) await handle(piece);
    } catch (err) {
      // The transcript could not be written (disk full): the attempt cannot go on without its record.
      failure = err;
      terminate();
    } finally {
      clearTimeout(stallTimer);
      clearInterval(beatTimer);
      o.signal.removeEventListener('abort', onAbort);
    }
    const done = await child;
    exited = true;
    clearTimeout(killTimer);
    // The tools get the rest of their grace, then SIGKILL, before the attempt reports how it ended.
    await stopping;
    if (failure) throw failure;
    result.exitCode = done.exitCode;
    result.exitSignal = done.signal;
    result.spawnError = done.failed && !child.pid ? (done.code ?? 'spawn failed') : undefined;
    result.stderrTail = await stderr;
    return result;
  })();
  if (!o.settleOnResult) return finished;
  const first = await Promise.race([finished.then(() => 'exited' as const, () => 'exited' as const), resultSettled]);
  return first === 'exited' ? finished : { stderrTail: '', truncatedAnswerBytes: result.truncatedAnswerBytes, exit: finished };
}

async function collectTail(stream: AsyncIterable<Buffer> | null | undefined): Promise<string> {
  let tail = '';
  if (!stream) return tail;
  for await (const chunk of stream) tail = `${tail}${chunk.toString('utf8')}`.slice(-STDERR_TAIL);
  return tail;
}
