import { chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { findExecutable } from '../../src/activities/process/find-executable.js';

/** Debian's PostgreSQL 15 (`apt-get install postgresql-15`; .ci/run installs it when missing). */
export const POSTGRES_BIN = '/usr/lib/postgresql/15/bin';

export interface Postgres {
  port: number;
  user: string;
  stop(): Promise<void>;
}

/**
 * Starts a throwaway PostgreSQL 15 cluster in a temp folder on `port` (loopback only, trust authentication for
 * the `temporal` superuser), as the Temporal server's persistence and visibility store. PostgreSQL refuses to run
 * as root, so as root it runs as the `postgres` user the Debian package creates.
 */
export async function startPostgres(port: number): Promise<Postgres> {
  const initdb = path.join(POSTGRES_BIN, 'initdb');
  if (!(await findExecutable(initdb, {}))) {
    throw new Error(`PostgreSQL 15 is not installed (no ${initdb}); install it with \`apt-get install postgresql-15\` (.ci/run does)`);
  }
  const dir = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-cluster-pg-'));
  const asRoot = process.getuid?.() === 0;
  const run = async (binary: string, args: string[]): Promise<void> => {
    const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', path.join(POSTGRES_BIN, binary), ...args]] : [path.join(POSTGRES_BIN, binary), args];
    const result = await execa(file, argv, { reject: false, all: true, timeout: 120_000 });
    if (result.exitCode !== 0) throw new Error(`${binary} ${args.join(' ')} failed (exit ${result.exitCode}):\n${String(result.all)}`);
  };
  if (asRoot) {
    const { stdout } = await execa('id', ['-u', 'postgres']);
    const { stdout: gid } = await execa('id', ['-g', 'postgres']);
    await chown(dir, Number(stdout), Number(gid));
  }
  const data = path.join(dir, 'data');
  const logFile = path.join(dir, 'postgres.log');
  await run('initdb', ['-D', data, '-U', 'temporal', '--auth=trust', '-E', 'UTF8', '--locale=C']);
  try {
    await run('pg_ctl', ['-D', data, '-l', logFile, '-w', '-t', '120', '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=300`, 'start']);
  } catch (err) {
    const log = await readFile(logFile, 'utf8').catch(() => '');
    throw new Error(`${(err as Error).message}\n${log}`);
  }
  return {
    port,
    user: 'temporal',
    stop: async () => {
      await run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
