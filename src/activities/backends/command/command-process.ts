import { execa, type ResultPromise } from 'execa';
import { existsSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import type { Readable } from 'node:stream';
import { formatSize, OUTPUT_CAPS } from '../../../pipeline/output-caps.js';
import { listProcessGroup, stopGracefully, type StopReport } from '../../process/stop.js';
import { findMarkedProcesses, STAGE_MARKER } from '../../process/sweep.js';
import type { TranscriptWriter } from '../claude-cli/transcript-writer.js';

/*
 * One run of a command stage's command, from its start to its exit: its stdout and stderr into the transcript (one
 * JSON line per line of output, read by `logs`), the ends of both kept for the stage's answer and its failure, a
 * heartbeat while it runs, and a stop (SIGTERM, grace, SIGKILL, leaves first) of everything it started when the
 * attempt is cancelled. Everything the command starts carries the attempt's marker, which is how a stop finds the
 * processes that left the command's process group (the sandbox starts its command in a session of its own).
 */

/** One run of a command. */
export interface CommandRunOptions {
  /** The full argv: the sandbox's prefix, if any, then the command's. */
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  transcript: TranscriptWriter;
  /** Between SIGTERM and SIGKILL. @unit milliseconds */
  killGraceMs: number;
  /** How often it heartbeats while it runs. @unit milliseconds */
  heartbeatIntervalMs: number;
  /** Kept of stdout for the answer: its end. @unit characters */
  stdoutTailChars: number;
  /** Kept of stderr for the failure: its end. @unit characters */
  stderrTailChars: number;
  /** Most the transcript takes of the output; later lines are counted, not kept. @unit bytes @default {@link TRANSCRIPT_CAP_BYTES} */
  transcriptCapBytes?: number;
  signal: AbortSignal;
  heartbeat(): void;
  /** Called once the process exists, with its pid (also its process group id). */
  onSpawn(pid: number): Promise<void>;
}

/** How the command ended. */
export interface CommandRunResult {
  exitCode?: number;
  /** The signal that ended it, e.g. `SIGKILL`. */
  exitSignal?: string;
  /** Set when it was stopped because the attempt was cancelled. */
  cancelled: boolean;
  /** The error code when it could not be started (`ENOENT`, `EACCES`). */
  spawnError?: string;
  stdoutTail: string;
  stderrTail: string;
}

/** util-linux's setpriv: the kernel sends the command SIGTERM when the worker dies (the watchdog does the rest). */
const SETPRIV = '/usr/bin/setpriv';

/** Starts the command in a process group of its own, with only the environment given, under setpriv where there is one. */
function spawnCommand(o: CommandRunOptions): ResultPromise {
  const [file, ...args] = existsSync(SETPRIV) ? [SETPRIV, '--pdeathsig', 'TERM', '--', ...o.argv] : o.argv;
  return execa(file!, args, { cwd: o.cwd, env: o.env, extendEnv: false, detached: true, buffer: false, reject: false, stdin: 'ignore' });
}

/** Runs the command to its exit (or to its stop, when cancelled), recording its output. */
export async function runCommandProcess(o: CommandRunOptions): Promise<CommandRunResult> {
  const child = spawnCommand(o);
  let exited = false;
  let cancelled = false;
  let stopping: Promise<StopReport | undefined> | undefined;
  const marker = o.env[STAGE_MARKER];
  const stop = (): void => {
    if (stopping) return;
    cancelled = true;
    const find = async (): Promise<number[]> => {
      const group = !exited && child.pid ? listProcessGroup(child.pid) : [];
      const marked = marker ? await findMarkedProcesses(STAGE_MARKER, marker, 'exact') : [];
      return [...new Set([...group, ...marked])];
    };
    stopping = stopGracefully(find, o.killGraceMs, { leavesFirst: true }).catch(() => undefined);
  };
  o.signal.addEventListener('abort', stop, { once: true });
  if (o.signal.aborted) stop();
  const beat = setInterval(() => o.heartbeat(), o.heartbeatIntervalMs);
  try {
    if (child.pid) await o.onSpawn(child.pid);
    const cap = new TranscriptCap(o.transcript, o.transcriptCapBytes ?? TRANSCRIPT_CAP_BYTES);
    const [stdoutTail, stderrTail] = await Promise.all([
      recordLines(child.stdout, 'stdout', (bytes) => cap.write(bytes), o.stdoutTailChars),
      recordLines(child.stderr, 'stderr', (bytes) => cap.write(bytes), o.stderrTailChars),
    ]);
    await cap.close();
    const done = await child;
    exited = true;
    await stopping;
    const spawnError = done.failed && !child.pid ? (done.code ?? 'spawn failed') : undefined;
    return { exitCode: done.exitCode, exitSignal: done.signal, cancelled, spawnError, stdoutTail, stderrTail };
  } finally {
    clearInterval(beat);
    o.signal.removeEventListener('abort', stop);
  }
}

/** Most of a command's output one attempt's transcript keeps (`yes` would otherwise fill the worker's disk). @unit bytes */
const TRANSCRIPT_CAP_BYTES = OUTPUT_CAPS.commandTranscriptBytes;

/**
 * The transcript's writes, one at a time (its redaction holds back the end of each write for the next one), up to
 * `capBytes`; past it, lines are counted and a last line says how many were not kept.
 */
class TranscriptCap {
  private queue = Promise.resolve();
  private written = 0;
  private droppedLines = 0;
  private droppedBytes = 0;

  constructor(private readonly transcript: TranscriptWriter, private readonly capBytes: number) {}

  write(bytes: Buffer): Promise<void> {
    if (this.droppedLines > 0 || this.written + bytes.length > this.capBytes) {
      this.droppedLines++;
      this.droppedBytes += bytes.length;
      return this.queue;
    }
    this.written += bytes.length;
    return (this.queue = this.queue.then(() => this.transcript.write(bytes)));
  }

  async close(): Promise<void> {
    if (this.droppedLines === 0) return this.queue;
    const text = `[agent-pipeline: ${this.droppedLines} more line(s) of output (${Math.ceil(this.droppedBytes / 1024)} KiB as recorded) not kept: the transcript keeps ${formatSize(this.capBytes)} of a command's output]`;
    const note = Buffer.from(`${JSON.stringify({ type: 'command', stream: 'stderr', text })}\n`);
    return (this.queue = this.queue.then(() => this.transcript.write(note)));
  }
}

/** Longest line kept whole in the transcript; the rest of a longer one is counted, not kept. @unit characters */
const MAX_LINE_CHARS = 64 * 1024;

/**
 * Writes each line of `stream` to the transcript as `{"type":"command","stream",...,"text"}`, and resolves to the end
 * of the output. Memory stays bounded whatever the command prints: a line over {@link MAX_LINE_CHARS} keeps its start
 * and says how much was cut.
 */
async function recordLines(stream: Readable | null | undefined, name: 'stdout' | 'stderr', write: (bytes: Buffer) => Promise<void>, tailChars: number): Promise<string> {
  let tail = '';
  if (!stream) return tail;
  let line = '';
  let cut = 0;
  const emit = async (): Promise<void> => {
    const text = cut > 0 ? `${line} … [cut: ${cut} more characters]` : line;
    await write(Buffer.from(`${JSON.stringify({ type: 'command', stream: name, text })}\n`));
    tail = `${tail}${text}\n`.slice(-tailChars);
    line = '';
    cut = 0;
  };
  const decoder = new StringDecoder('utf8');
  const take = async (text: string): Promise<void> => {
    const parts = text.split('\n');
    for (const [i, part] of parts.entries()) {
      const room = MAX_LINE_CHARS - line.length;
      line += part.slice(0, Math.max(0, room));
      cut += Math.max(0, part.length - room);
      if (i < parts.length - 1) await emit();
    }
  };
  for await (const chunk of stream as AsyncIterable<Buffer>) await take(decoder.write(chunk));
  await take(decoder.end());
  if (line !== '' || cut > 0) await emit();
  return tail;
}
