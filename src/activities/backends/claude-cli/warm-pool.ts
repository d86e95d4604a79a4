import { isDeepStrictEqual } from 'node:util';
import type { ResultPromise } from 'execa';
import { hashRegularFile, RegularFileError } from '../../../files/regular-file.js';
import { isGone, stopMarkedProcesses } from '../../process/stop.js';
import { STAGE_MARKER } from '../../process/sweep.js';
import { spawnAgent, type AgentLaunch } from './spawn-agent.js';

/*
 * Warm start: a `claude -p` process spawned before its stage starts, with the exact command line, environment and
 * working folder the stage will use, and its prompt not yet written. It starts up (reads its settings, CLAUDE.md
 * and MCP config, loads its tools) and then waits on stdin; the stage's attempt adopts it and writes the prompt,
 * so the start-up is off the critical path. A waiting process that does not match exactly is stopped, never used.
 *
 * Stale start-up state: the process read some files at spawn. Their content hashes are taken at spawn and checked
 * again at adoption; any change (a stage running meanwhile edited CLAUDE.md) discards the process.
 *
 * Dead or dying processes: a waiting process can exit at any time (stopped by a stage sweep, killed, its stdin closed:
 * the CLI then exits 0 without a word). Node reports the exit some event-loop turns later, and execa only once the
 * process's output is closed, so `exited` alone lags behind: adoption also asks the kernel (/proc) and the streams, once
 * before and once after its own awaits. An attempt whose agent was taken out of the pool while it was being stopped
 * waits for that stop to end before it starts its own agent, which carries the same marker.
 */

/** How a waiting process is started; adoption compares all of it. */
export type WarmLaunch = AgentLaunch;

/** A waiting process's identity, which the adopting attempt takes on so that its command line can match. */
export interface WarmIdentity {
  sessionId: string;
  /** The stage marker (`AGENT_PIPELINE_STAGE`) in its environment. */
  marker: string;
}

interface WarmEntry extends WarmLaunch, WarmIdentity {
  child: ResultPromise;
  /** Content hash of each file the process read at start-up (`''` for a missing file). */
  hashes: Map<string, string>;
  ttlTimer: NodeJS.Timeout;
  exited: boolean;
  /** Whether its stage may still need it; `false` once the stage started elsewhere or the run ended. */
  wanted?: () => Promise<boolean>;
}

/** What {@link WarmPool.take} found. */
export type WarmTake = { kind: 'adopted'; child: ResultPromise } | { kind: 'discarded'; reason: string } | { kind: 'none' };

export interface WarmPoolOptions {
  /** A waiting process is stopped after this long. @unit milliseconds */
  ttlMs: number;
  /** How often each waiting process's `wanted` check runs. @unit milliseconds @default 1000 */
  checkIntervalMs?: number;
  /** Between SIGTERM and SIGKILL when a waiting process is stopped. @unit milliseconds */
  killGraceMs: number;
  /** The worker's agent limit: running attempts plus waiting processes never exceed it. */
  limit: number;
}

/** The waiting processes of one worker, keyed by run workspace and stage; see the module comment. */
export class WarmPool {
  private readonly entries = new Map<string, WarmEntry>();
  /** Stops under way, by key: the stopped process's marker is the one the attempt of that stage takes on. */
  private readonly stopping = new Map<string, Promise<void>>();
  private running = 0;
  private checkTimer?: NodeJS.Timeout;

  constructor(private readonly options: WarmPoolOptions) {}

  /** Waiting processes right now. */
  get size(): number {
    return this.entries.size;
  }

  /** The identity of the process waiting for `key`, if any. */
  peek(key: string): WarmIdentity | undefined {
    const entry = this.entries.get(key);
    return entry && !gone(entry) ? { sessionId: entry.sessionId, marker: entry.marker } : undefined;
  }

  /**
   * Spawns a waiting process for `key` unless one is there or the agent limit leaves no room. `wanted` is checked
   * every `checkIntervalMs`: once it says no (its stage started on another worker, its run ended), the process is
   * stopped rather than left to its TTL.
   */
  async spawn(key: string, launch: WarmLaunch & WarmIdentity, watched: string[], wanted?: () => Promise<boolean>): Promise<boolean> {
    if (this.entries.has(key) || this.running + this.entries.size >= this.options.limit) return false;
    const hashes = await hashFiles(watched);
    // Checked again after the await: another prewarm for the same stage may have won the race.
    if (this.entries.has(key) || this.running + this.entries.size >= this.options.limit) return false;
    const child = spawnAgent(launch);
    child.catch(() => undefined);
    const entry: WarmEntry = { ...launch, child, hashes, exited: false, wanted, ttlTimer: setTimeout(() => void this.discard(key), this.options.ttlMs) };
    entry.ttlTimer.unref();
    if (wanted) this.startChecks();
    void child.finally(() => {
      entry.exited = true;
      if (this.entries.get(key) === entry) this.entries.delete(key);
    });
    this.entries.set(key, entry);
    return true;
  }

  /**
   * Hands over the process waiting for `key` when it still waits (alive, its stdin open, its output not ended), `launch`
   * is exactly how it was started and the files it read are unchanged; otherwise stops it. Either way the key is free
   * afterwards, and no stop of a process of this key is still under way.
   */
  async take(key: string, launch: WarmLaunch): Promise<WarmTake> {
    const entry = this.entries.get(key);
    if (!entry) {
      // Discarded since the attempt looked (its TTL, its stage started elsewhere, the agent limit): the stop looks for
      // the marker the attempt's own agent is about to carry.
      await this.stopping.get(key);
      return { kind: 'none' };
    }
    this.entries.delete(key);
    clearTimeout(entry.ttlTimer);
    // Checked again after the file hashes: the process may have died while they were read.
    const reason = notWaiting(entry) ?? mismatch(entry, launch) ?? (await changedFile(entry)) ?? notWaiting(entry);
    if (reason) {
      await this.stop(entry);
      return { kind: 'discarded', reason };
    }
    return { kind: 'adopted', child: entry.child };
  }

  /**
   * Counts an attempt's agent against the limit until `done` is called; waiting processes beyond the limit are
   * stopped, oldest first, so that the attempt's own agent always has room.
   */
  async attemptStarted(): Promise<() => void> {
    this.running++;
    const excess = this.running + this.entries.size - this.options.limit;
    if (excess > 0) await Promise.all([...this.entries.keys()].slice(0, excess).map((key) => this.discard(key)));
    let done = false;
    return () => {
      if (!done) this.running--;
      done = true;
    };
  }

  /** Stops the processes waiting for these keys, if they still wait. */
  async discardAll(keys: readonly string[]): Promise<void> {
    await Promise.all(keys.map((key) => this.discard(key)));
  }

  /** Stops every waiting process (worker shutdown). */
  async stopAll(): Promise<void> {
    await Promise.all([...this.entries.keys()].map((key) => this.discard(key)));
  }

  /** Checks the waiting processes' `wanted` on a timer while any waits (one timer per pool; it never holds the worker up). */
  private startChecks(): void {
    if (this.checkTimer) return;
    this.checkTimer = setInterval(() => void this.checkWanted(), this.options.checkIntervalMs ?? 1_000);
    this.checkTimer.unref();
  }

  private async checkWanted(): Promise<void> {
    if (this.entries.size === 0) {
      clearInterval(this.checkTimer);
      this.checkTimer = undefined;
      return;
    }
    await Promise.all(
      [...this.entries].map(async ([key, entry]) => {
        const still = entry.wanted ? await entry.wanted().catch(() => true) : true;
        if (!still && this.entries.get(key) === entry) await this.discard(key);
      }),
    );
  }

  private async discard(key: string): Promise<void> {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    clearTimeout(entry.ttlTimer);
    const stopped = this.stop(entry).finally(() => {
      if (this.stopping.get(key) === stopped) this.stopping.delete(key);
    });
    this.stopping.set(key, stopped);
    await stopped;
  }

  private async stop(entry: WarmEntry): Promise<void> {
    // Stopped like every agent (SIGTERM, grace, SIGKILL), found by its own stage marker, never by a pid alone; also when
    // the CLI itself has exited, since a tool it started may not have.
    await stopMarkedProcesses(STAGE_MARKER, entry.marker, 'exact', this.options.killGraceMs);
    await Promise.resolve(entry.child).catch(() => undefined);
  }
}

/** Whether the process has exited, as Node or the kernel knows it (a zombie has: it only waits to be reaped). */
function gone(entry: WarmEntry): boolean {
  const { child } = entry;
  return entry.exited || child.exitCode !== null || child.signalCode !== null || !child.pid || isGone(child.pid);
}

/** Why a waiting process can no longer take a prompt, if it cannot. */
function notWaiting(entry: WarmEntry): string | undefined {
  if (gone(entry)) return 'it had exited';
  const { stdin, stdout } = entry.child;
  // Its prompt could not reach it, or it closed its output: either way it is on its way out.
  if (!stdin || stdin.destroyed || stdin.writableEnded) return 'its stdin was closed';
  if (!stdout || stdout.destroyed || stdout.readableEnded) return 'its output had ended';
  return undefined;
}

function mismatch(entry: WarmEntry, launch: WarmLaunch): string | undefined {
  if (entry.binary !== launch.binary) return `the claude binary differs (${entry.binary} vs ${launch.binary})`;
  if (!isDeepStrictEqual(entry.args, launch.args)) return `its command line differs (waiting: ${entry.args.join(' ')}; wanted: ${launch.args.join(' ')})`;
  if (entry.cwd !== launch.cwd) return 'its working folder differs';
  if (!isDeepStrictEqual(entry.env, launch.env)) {
    const keys = [...new Set([...Object.keys(entry.env), ...Object.keys(launch.env)])].filter((k) => entry.env[k] !== launch.env[k]);
    return `its environment differs (${keys.join(', ')})`;
  }
  return undefined;
}

async function changedFile(entry: WarmEntry): Promise<string | undefined> {
  const now = await hashFiles([...entry.hashes.keys()]);
  for (const [file, hash] of entry.hashes) if (now.get(file) !== hash) return `${file} changed after it started`;
  return undefined;
}

/** The most of a start-up file hashed; a larger one is known by its size. @unit bytes */
const MAX_HASHED_BYTES = 16 * 1024 * 1024;

/**
 * Each file's content hash: `''` when missing or not a regular file, its size when above the cap. Most of these files
 * are in the run's workspace, where a stage may have left a FIFO (whose open would wait for a writer on one of libuv's
 * few threads) or a symlink to a device: checked on the handle (symlinks followed, as `claude` follows them).
 */
async function hashFiles(files: string[]): Promise<Map<string, string>> {
  const hashes = await Promise.all(
    files.map(async (file) => {
      const hashed = await hashRegularFile(file, { follow: true, maxBytes: MAX_HASHED_BYTES }).catch((err: unknown) =>
        err instanceof RegularFileError && err.code === 'EFBIG' ? { sha256: `${err.bytes} bytes` } : undefined,
      );
      return [file, hashed?.sha256 ?? ''] as const;
    }),
  );
  return new Map(hashes);
}
