import { open, readFile, rm, writeFile } from 'node:fs/promises';
import { DevServerError, DevServerErrorCode } from './dev-server-error.js';

/** Who holds a dev server's database: the process that started the server, and the server once spawned. */
interface LockOwner {
  pid: number;
  serverPid?: number;
  address: string;
}

/** A held database lock: record the server's pid once spawned, release when it stops. */
export interface DatabaseLock {
  setServerPid(pid: number): Promise<void>;
  release(): Promise<void>;
}

/**
 * Takes `<dbFile>.lock` for a server at `address`, so two Temporal servers never share one SQLite file. A lock whose
 * processes are all gone (a crash, a kill -9) is taken over.
 * @throws {DevServerError} DB_IN_USE when a live process holds it
 */
export async function lockDatabase(dbFile: string, address: string): Promise<DatabaseLock> {
  const lockFile = `${dbFile}.lock`;
  const owner: LockOwner = { pid: process.pid, address };
  for (let attempt = 0; ; attempt++) {
    try {
      const handle = await open(lockFile, 'wx');
      await handle.writeFile(JSON.stringify(owner));
      await handle.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw err;
      const holder = await readOwner(lockFile);
      if (holder && [holder.pid, holder.serverPid].some((pid) => pid !== undefined && isAlive(pid))) {
        throw new DevServerError(
          DevServerErrorCode.DB_IN_USE,
          `${dbFile} is in use by the dev server at ${holder.address} (process ${holder.serverPid ?? holder.pid}); two servers on one database mix their runs. ` +
            'Use that server (TEMPORAL_ADDRESS), stop it, or give this one its own database (another --port, AGENT_PIPELINE_HOME, or dbFile).',
        );
      }
      await rm(lockFile, { force: true });
    }
  }
  let released = false;
  return {
    async setServerPid(pid) {
      owner.serverPid = pid;
      await writeFile(lockFile, JSON.stringify(owner));
    },
    async release() {
      if (released) return;
      released = true;
      await rm(lockFile, { force: true });
    },
  };
}

async function readOwner(lockFile: string): Promise<LockOwner | undefined> {
  try {
    const owner = JSON.parse(await readFile(lockFile, 'utf8')) as Partial<LockOwner>;
    return typeof owner.pid === 'number' ? { pid: owner.pid, serverPid: owner.serverPid, address: owner.address ?? 'an unknown address' } : undefined;
  } catch {
    return undefined;
  }
}

/** True while a process with this id exists (signal 0 checks without sending anything; EPERM means it exists). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
