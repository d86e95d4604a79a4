import type { ResultPromise } from 'execa';
import type { AttemptProgress } from '../stage-backend.js';
import type { PromptBridge, PromptOutcome } from './control-protocol.js';
import type { CliEventReader } from './events.js';
import type { TranscriptWriter } from './transcript-writer.js';

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
  /**
   * Answers the CLI's permission requests (`--permission-prompt-tool stdio`, docs/permission-prompts.md). With it,
   * stdin stays open for the answers until the agent's result; stall detection pauses while a person decides.
   */
  prompts?: PromptBridge;
}

/** How the process ended. */
export interface CliProcessResult {
  exitCode?: number;
  /** The signal that ended it, e.g. `SIGTERM`. */
  exitSignal?: string;
  /** Why we stopped it, if we did: cancelled, stalled, or a person's decision (or its deadline) ended the attempt. */
  stoppedFor?: 'cancelled' | 'stalled' | 'decided';
  /** The failure a decision ended the attempt with (`stoppedFor: 'decided'`). */
  decided?: NonNullable<PromptOutcome['fail']>;
  /** The error code when it could not be started (`ENOENT`, `EACCES`). */
  spawnError?: string;
  stderrTail: string;
  /** Size of the largest assistant or result event whose text had to be cut to its tail. @unit bytes */
  truncatedAnswerBytes: number;
  /** What the agent wrote on stdout; 0 means it never began on its prompt (the CLI prints nothing before it). @unit bytes */
  stdoutBytes: number;
  /** Set when the attempt settled on the result before the process exited: how it exited, once it has. */
  exit?: Promise<CliProcessResult>;
}
