import { randomUUID } from 'node:crypto';
import { lstat, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { withLock } from './keyed-lock.js';
import { readOwnFile } from './own-files.js';

/*
 * A lock held across the worker processes that share one workspaces folder (several workers on one volume, in one
 * container or several), and within one process. It is a folder made with mkdir, which only one maker wins, on a
 * local disk as on a shared volume; in it the holder keeps `holder.json`, rewritten every few seconds while it holds
 * the lock. A waiter takes over a lock whose record it has seen unchanged for `staleMs`: its holder was killed (a
 * SIGKILL, a lost container) or is frozen. Staleness is what the waiter sees change, never a modification time set by
 * another host's clock: processes on one volume need not agree on the time, and an NFS client caches a folder's times
 * for up to a minute but reads a file afresh at each open. No pid is checked: a pid says nothing across containers.
 */

/** The holder's record, as the lock's folder keeps it (shown to those who wait). */
export interface LockHolder {
  pid: number;
  host: string;
  /** When it took the lock. @format date-time */
  since: string;
}

export interface SharedLockOptions {
  /** Stops a wait: the call rejects with the signal's reason. */
  signal?: AbortSignal;
  /** How often a waiter tries again. @unit milliseconds @default 250 */
  pollMs?: number;
  /**
   * A holder whose record a waiter has seen unchanged this long is taken for gone, and its lock taken over; the holder
   * rewrites it every quarter of this (at most every 2 s). @unit milliseconds @default 20000
   */
  staleMs?: number;
  /** Told once per call, when it finds the lock held (its holder as the record says, when it says). */
  onWait?: (holder: LockHolder | undefined) => void;
  /** Told when the call took over a gone holder's lock. */
  onTakeOver?: (holder: LockHolder | undefined) => void;
  /** Told when another process took the lock over while this call held it (this process froze past `staleMs`). */
  onLost?: () => void;
}

const RECORD = 'holder.json';
const DEFAULT_STALE_MS = 20_000;

/**
 * Runs `fn` holding the lock `lockDir` (a folder path whose parent exists and is the worker's own), waiting for it
 * first while another call, in this process or another, holds it. Calls of this process take their turns in the
 * process first (keyed-lock.ts): they follow one another at once, where polling the folder would cost each a fraction
 * of a second, and a lock this process holds is never taken for a gone holder's, however long its record stays
 * unchanged (a frozen event loop).
 * @throws the signal's reason when cancelled while waiting
 */
export async function withSharedLock<T>(lockDir: string, fn: () => Promise<T>, options: SharedLockOptions = {}): Promise<T> {
  let told = false;
  const onQueued = () => {
    told = true;
    options.onWait?.(undefined);
  };
  return withLock(
    `shared:${lockDir}`,
    async () => {
      const release = await acquire(lockDir, options, told);
      try {
        return await fn();
      } finally {
        await release();
      }
    },
    { signal: options.signal, onQueued },
  );
}

async function acquire(lockDir: string, options: SharedLockOptions, toldAlready: boolean): Promise<() => Promise<void>> {
  const staleMs = options.staleMs ?? DEFAULT_STALE_MS;
  let seen: { signature: string; at: number } | undefined;
  let told = toldAlready;
  for (;;) {
    options.signal?.throwIfAborted();
    const made = await mkdir(lockDir).then(
      () => true,
      (err: NodeJS.ErrnoException) => {
        if (err.code === 'EEXIST') return false;
        throw err;
      },
    );
    if (made) return hold(lockDir, staleMs, options.onLost);
    const signature = await signatureOf(lockDir);
    // Released between the two looks: try again at once.
    if (signature === undefined) continue;
    if (!told) options.onWait?.(holderIn(signature));
    told = true;
    const now = performance.now();
    if (seen?.signature !== signature) seen = { signature, at: now };
    else if (now - seen.at >= staleMs) {
      if (await takeOver(lockDir, signature)) options.onTakeOver?.(holderIn(signature));
      seen = undefined;
      continue;
    }
    await sleep(options.pollMs ?? 250, undefined, options.signal ? { signal: options.signal } : undefined).catch((err: unknown) => {
      options.signal?.throwIfAborted();
      throw err;
    });
  }
}

/** Keeps the record of a lock just made fresh until released; the release removes the lock unless it was taken over. */
async function hold(lockDir: string, staleMs: number, onLost: (() => void) | undefined): Promise<() => Promise<void>> {
  const record = path.join(lockDir, RECORD);
  const token = randomUUID();
  const since = new Date().toISOString();
  let beat = 0;
  const write = () => writeFile(record, `${JSON.stringify({ pid: process.pid, host: os.hostname(), since, token, beat: beat++ })}\n`);
  const mine = async () => (await readOwnFile(record))?.toString('utf8').includes(`"token":"${token}"`) ?? false;
  let lost = false;
  let busy = false;
  const refresh = async () => {
    if (busy || lost) return;
    busy = true;
    try {
      if (await mine()) await write();
      else {
        lost = true;
        onLost?.();
      }
    } catch {
      // A passing failure (a full disk): the next beat tries again; past staleMs a waiter takes the lock over.
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void refresh(), Math.min(2_000, staleMs / 4));
  timer.unref();
  try {
    await write();
  } catch (err) {
    clearInterval(timer);
    await rm(lockDir, { recursive: true, force: true });
    throw err;
  }
  return async () => {
    clearInterval(timer);
    try {
      if (!lost && (await mine())) await rm(lockDir, { recursive: true, force: true });
    } catch {
      // Not worth failing the work done under it: the lock goes stale, and the next waiter takes it over.
    }
  };
}

/** What a waiter compares between its looks: the lock folder's inode and its record; undefined when there is no lock. */
async function signatureOf(lockDir: string): Promise<string | undefined> {
  const info = await lstat(lockDir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (!info) return undefined;
  // A folder just made has no record yet: its inode alone tells it from the next one.
  const record = info.isDirectory() ? ((await readOwnFile(path.join(lockDir, RECORD), 4_096))?.toString('utf8') ?? '') : '';
  return `${info.ino}\n${record}`;
}

/**
 * Moves a gone holder's lock aside and removes it. Moved aside first, so that of two waiters taking over at once, the
 * later never removes the lock the earlier has just made: what it moved is checked, and put back when it is not the
 * lock it saw go stale. @returns whether it removed the stale lock
 */
async function takeOver(lockDir: string, stale: string): Promise<boolean> {
  const aside = `${lockDir}.stale-${randomUUID()}`;
  try {
    await rename(lockDir, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  if ((await signatureOf(aside)) === stale) {
    await rm(aside, { recursive: true, force: true });
    return true;
  }
  await rename(aside, lockDir).catch(() => rm(aside, { recursive: true, force: true }));
  return false;
}

/** The holder a signature's record names, when it names one. */
function holderIn(signature: string): LockHolder | undefined {
  try {
    const record = JSON.parse(signature.slice(signature.indexOf('\n') + 1)) as Partial<LockHolder>;
    return typeof record.pid === 'number' && typeof record.host === 'string' && typeof record.since === 'string' ? { pid: record.pid, host: record.host, since: record.since } : undefined;
  } catch {
    return undefined;
  }
}
