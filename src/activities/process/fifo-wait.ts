import { descendantsOf, readWaitChannel } from './proc.js';

/*
 * A program the worker runs over a run's files (git staging a worktree) opens each file it lists by its path, without
 * O_NONBLOCK: a stage running alongside that swaps a listed file for a FIFO between git's look and its open leaves git
 * waiting for a writer that never comes, and the checkpoint or the commit waiting with it, for good. The kernel names
 * that wait (`wait_for_partner`, fs/pipe.c), so the worker looks at its child now and then and stops it when it waits
 * there: the program fails, naming why, instead of hanging. A program run confined (process/confined.ts) is a child
 * of bubblewrap, so the processes below the child are looked at too.
 */

/** Where a process opening a FIFO with nobody at the other end waits, as /proc/<pid>/wchan names it. */
const FIFO_OPEN_WAIT = 'wait_for_partner';

/** How often a running child is looked at. @unit milliseconds @default 1000 */
export const FIFO_WATCH_MS = 1_000;

/** What {@link watchFifoWait} returns. */
export interface FifoWatch {
  /** Stops looking (call it once the child ended). */
  stop(): void;
  /** Whether the child was found waiting on a FIFO (and `onWait` called). */
  readonly fired: boolean;
}

/**
 * Looks at process `pid` and those below it every `intervalMs` while it runs and calls `onWait` (once) with the one
 * that waits to open a FIFO. Without /proc it never fires.
 */
export function watchFifoWait(pid: number | undefined, onWait: (waiting: number) => void, intervalMs = FIFO_WATCH_MS): FifoWatch {
  let fired = false;
  const timer =
    pid === undefined
      ? undefined
      : setInterval(() => {
          const waiting = [pid, ...descendantsOf(pid)].find((p) => readWaitChannel(p) === FIFO_OPEN_WAIT);
          if (waiting === undefined) return;
          fired = true;
          clearInterval(timer);
          onWait(waiting);
        }, intervalMs);
  timer?.unref();
  return {
    stop: () => clearInterval(timer),
    get fired() {
      return fired;
    },
  };
}
