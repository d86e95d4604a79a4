/*
 * Stopping an agent's process group the house way: SIGTERM, a grace period, then SIGKILL. A process killed
 * outright leaves its locks behind. Used for warm processes that are never adopted; kept in one place so that it
 * can give way to the shared stop function of the backends when that lands.
 */

/**
 * Sends SIGTERM to the process group `pgid` (the agent was spawned detached, so its pid is the group id), waits
 * up to `graceMs` for `exited` to settle, then SIGKILLs the group. Resolves once the process has exited.
 */
export async function stopProcessGroup(pgid: number, exited: Promise<unknown>, graceMs: number): Promise<void> {
  let gone = false;
  const done = exited.then(
    () => {
      gone = true;
    },
    () => {
      gone = true;
    },
  );
  signalGroup(pgid, 'SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([done, new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))]);
  clearTimeout(timer);
  // Once the process has exited its pid may be reused: never signal it then.
  if (!gone) signalGroup(pgid, 'SIGKILL');
  await done;
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // Already gone.
  }
}
