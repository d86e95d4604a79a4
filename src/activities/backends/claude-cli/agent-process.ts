import type { ResultPromise } from 'execa';
import type { CliProcessOptions, CliProcessResult } from './agent-process-options.js';
import { controlResponseLine, isControlRequest, type ControlRequest, type PromptBridge } from './control-protocol.js';
import { listProcessGroup, stopGracefully, type StopReport } from '../../process/stop.js';
import { findMarkedProcesses } from '../../process/sweep.js';
import { spawnAgent } from './spawn-agent.js';
import { StdoutLineSplitter, type StdoutPiece } from './stream-lines.js';

const NEWLINE = Buffer.from('\n');
/** Kept of the CLI's stderr, for failure details. @unit characters */
const STDERR_TAIL = 4_000;
/** Least time between two heartbeats prompted by partial-message deltas. @unit milliseconds */
const DELTA_HEARTBEAT_GAP_MS = 1_000;

/**
 * Runs `claude` in its own process group, streams stdout into the transcript and the event reader,
 * heartbeats, and stops the agent when it stalls or the attempt is cancelled: SIGTERM to the group and every
 * marked process, SIGKILL after the grace period to what is left. Resolves when the process has exited, or at its
 * result event when `settleOnResult` allows.
 */
export async function runCliProcess(o: CliProcessOptions): Promise<CliProcessResult> {
  const run = new CliProcessRun(o, startOrAdopt(o));
  const exited = run.untilExit();
  if (!o.settleOnResult) return exited;
  const first = await Promise.race([exited.then(() => 'exited' as const, () => 'exited' as const), run.resultSettled]);
  return first === 'exited' ? exited : { stderrTail: '', truncatedAnswerBytes: run.truncatedAnswerBytes, stdoutBytes: run.stdoutBytes, exit: exited };
}

/** A new `claude` process that reads the prompt from stdin, or the warm one waiting for it. */
function startOrAdopt(o: CliProcessOptions): ResultPromise {
  if (o.prompts) {
    // The answers to permission requests follow the prompt on stdin: it stays open until the result.
    const child = o.spawned ?? spawnAgent(o);
    child.stdin?.on('error', () => {});
    child.stdin?.write(o.stdin);
    return child;
  }
  if (!o.spawned) return spawnAgent(o, o.stdin);
  // An adopted warm process has started up already; writing its prompt and closing stdin is all that is left.
  // A process that died while it waited makes the write fail with EPIPE; its exit is what the attempt reports.
  o.spawned.stdin?.on('error', () => {});
  o.spawned.stdin?.end(o.stdin);
  return o.spawned;
}

/** One `claude` process of an attempt, from its start to its exit: the watchers that stop it, and its output. */
class CliProcessRun {
  private readonly result: CliProcessResult = { stderrTail: '', truncatedAnswerBytes: 0, stdoutBytes: 0 };
  private readonly stderr: Promise<string>;
  private exited = false;
  private killTimer: NodeJS.Timeout | undefined;
  private stopping: Promise<StopReport | undefined> | undefined;
  // Stall detection follows the agent's output, not the wall clock: a long but active stage is never stopped.
  private stallTimer: NodeJS.Timeout | undefined;
  private readonly beatTimer: NodeJS.Timeout;
  private lastBeatAt = 0;
  // Set once the attempt settled on the agent's result (`settleOnResult`): the activity completes, and from then on
  // nobody reads its heartbeats.
  private settled = false;
  private settle: () => void = () => {};
  /** Resolves when the attempt may settle on the agent's result (see `CliProcessOptions.settleOnResult`). */
  readonly resultSettled = new Promise<'result'>((resolve) => {
    this.settle = () => {
      this.settled = true;
      clearInterval(this.beatTimer);
      resolve('result');
    };
  });
  private readonly onAbort = (): void => this.stop('cancelled');
  /** Permission requests a person is deciding: while any is open the agent is silent by design, not stalled. */
  private openPrompts = 0;
  private outputEnded = false;

  constructor(
    private readonly o: CliProcessOptions,
    private readonly child: ResultPromise,
  ) {
    o.signal.addEventListener('abort', this.onAbort, { once: true });
    if (o.signal.aborted) this.stop('cancelled');
    this.armStallTimer();
    this.beatTimer = setInterval(() => this.beat(), o.heartbeatIntervalMs);
    this.stderr = collectTail(child.stderr);
  }

  get truncatedAnswerBytes(): number {
    return this.result.truncatedAnswerBytes;
  }

  get stdoutBytes(): number {
    return this.result.stdoutBytes;
  }

  /** Reads the agent's output to its end, then waits for the process (and the tools being stopped) to be gone. */
  async untilExit(): Promise<CliProcessResult> {
    let failure: unknown;
    // The reader attaches now, before anything awaits: execa puts an unread stdout into flowing mode a moment after the
    // spawn (`buffer: false`), and what flows with no reader is lost. An adopted warm agent answers at once: under load
    // its whole answer came and went while the lock file was being written (exit 0, empty transcript, CLI_CRASHED).
    const reading = this.readOutput();
    reading.catch(() => undefined);
    try {
      if (this.child.pid) await this.o.onSpawn(this.child.pid);
      await reading;
    } catch (err) {
      // The transcript or the lock file could not be written (disk full): the attempt cannot go on without its record.
      failure = err;
      this.terminate();
      await reading.catch(() => undefined);
    } finally {
      this.outputEnded = true;
      clearTimeout(this.stallTimer);
      clearInterval(this.beatTimer);
      this.o.signal.removeEventListener('abort', this.onAbort);
    }
    const done = await this.child;
    this.exited = true;
    clearTimeout(this.killTimer);
    // The tools get the rest of their grace, then SIGKILL, before the attempt reports how it ended.
    await this.stopping;
    if (failure) throw failure;
    this.result.exitCode = done.exitCode;
    this.result.exitSignal = done.signal;
    this.result.spawnError = done.failed && !this.child.pid ? (done.code ?? 'spawn failed') : undefined;
    this.result.stderrTail = await this.stderr;
    return this.result;
  }

  private async readOutput(): Promise<void> {
    const splitter = new StdoutLineSplitter();
    for await (const chunk of (this.child.stdout ?? []) as AsyncIterable<Buffer>) {
      this.result.stdoutBytes += chunk.length;
      for (const piece of splitter.push(chunk)) await this.handle(piece);
    }
    for (const piece of splitter.end()) await this.handle(piece);
  }

  /** One piece of stdout: into the transcript, the event reader, stall detection and the heartbeats. */
  private async handle(piece: StdoutPiece): Promise<void> {
    if (piece.kind === 'long-bytes') return this.o.transcript.write(piece.chunk);
    const text = piece.kind === 'line' ? piece.raw.toString('utf8') : piece.skeleton;
    const event = parseEvent(text);
    const type = (event as { type?: unknown } | undefined)?.type;
    // Partial-message deltas only feed stall detection: the `assistant` event after them holds the same text.
    if (piece.kind === 'line' && type !== 'stream_event') {
      await this.o.transcript.write(piece.raw);
      await this.o.transcript.write(NEWLINE);
    }
    if (piece.kind === 'long-line' && piece.truncatedStrings > 0 && (type === 'assistant' || type === 'result')) {
      this.result.truncatedAnswerBytes = Math.max(this.result.truncatedAnswerBytes, piece.bytes);
    }
    if (this.o.prompts && isControlRequest(event)) this.answerPrompt(event, this.o.prompts);
    if (this.o.reader.read(event)) this.armStallTimer();
    // The turn is over: nothing more to answer, and a closed stdin lets the CLI exit.
    if (type === 'result' && this.o.prompts) this.child.stdin?.end();
    if (type === 'result' && this.o.settleOnResult?.(this.o.reader)) this.settle();
    // Deltas come by the hundred per answer and add nothing the next whole event does not carry; each heartbeat
    // call converts its details to a payload, so they only prompt one now and then.
    if (type !== 'stream_event' || Date.now() - this.lastBeatAt >= DELTA_HEARTBEAT_GAP_MS) this.beat();
  }

  private beat(): void {
    if (this.settled) return;
    this.lastBeatAt = Date.now();
    this.o.heartbeat(this.o.reader.progress());
  }

  /** Asks for a decision off the read loop (the CLI goes on writing), writes it back, and resumes stall detection. */
  private answerPrompt(request: ControlRequest, prompts: PromptBridge): void {
    this.openPrompts += 1;
    clearTimeout(this.stallTimer);
    prompts
      .answer(request)
      .then(
        (outcome) => {
          if (!this.exited) this.child.stdin?.write(outcome.line);
          if (outcome.fail) {
            this.result.decided = outcome.fail;
            this.stop('decided');
          }
        },
        // Nobody could be asked (the attempt is being cancelled, the workflow refused): the call is not run.
        (err: unknown) => {
          if (!this.exited) this.child.stdin?.write(controlResponseLine(request.request_id, { behavior: 'deny', message: `No person could be asked: ${(err as Error).message}` }));
        },
      )
      .finally(() => {
        this.openPrompts -= 1;
        this.armStallTimer();
      });
  }

  private armStallTimer(): void {
    clearTimeout(this.stallTimer);
    if (this.openPrompts > 0 || this.outputEnded) return;
    this.stallTimer = setTimeout(() => this.stop('stalled'), this.o.reader.sawOutput ? this.o.stallTimeoutMs : this.o.firstOutputTimeoutMs);
  }

  private stop(why: NonNullable<CliProcessResult['stoppedFor']>): void {
    if (this.result.stoppedFor) return;
    this.result.stoppedFor = why;
    this.terminate();
  }

  private terminate(): void {
    if (this.stopping || this.killTimer) return;
    // SIGTERM to the agent and every tool (its process group and every process carrying its marker, sandboxed tools
    // among them), leaves first, so that each can clean up (release its locks) within the grace.
    const { marker, killGraceMs } = this.o;
    const pid = this.child.pid;
    const find = async (): Promise<number[]> => {
      const group = !this.exited && pid ? listProcessGroup(pid) : [];
      const marked = marker ? await findMarkedProcesses(marker.name, marker.value, 'exact') : [];
      return [...new Set([...group, ...marked])];
    };
    this.stopping = stopGracefully(find, killGraceMs, { leavesFirst: true }).catch(() => undefined);
    this.killTimer = setTimeout(() => this.signalGroup('SIGKILL'), killGraceMs);
  }

  private signalGroup(signal: NodeJS.Signals): void {
    // Once the process has exited its pid may be reused: never signal it then.
    if (this.exited || !this.child.pid) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/** The event a line of stdout holds, or undefined for one that is not JSON. */
function parseEvent(text: string | undefined): unknown {
  try {
    return text === undefined ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

async function collectTail(stream: AsyncIterable<Buffer> | null | undefined): Promise<string> {
  let tail = '';
  if (!stream) return tail;
  for await (const chunk of stream) tail = `${tail}${chunk.toString('utf8')}`.slice(-STDERR_TAIL);
  return tail;
}
