import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { execa, type ResultPromise } from 'execa';
import { SEARCH_ATTRIBUTES } from '../../src/contracts/search-attributes.js';
import type { ServerBinaries } from './server-binaries.js';

const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');
/** The dynamic config docker-compose.yml mounts into the server container. */
export const DYNAMIC_CONFIG = path.join(PROJECT_ROOT, 'deploy', 'temporal', 'dynamicconfig.yaml');

/** The schema tool's commands from docker-compose.yml's `temporal-schema` service, with the tool's embedded schemas. */
export async function setupSchema(sqlTool: string, pgPort: number): Promise<void> {
  const base = ['--plugin', 'postgres12', '--ep', '127.0.0.1', '-p', String(pgPort), '-u', 'temporal', '--pw', 'temporal'];
  for (const [db, dir] of [['temporal', 'temporal'], ['temporal_visibility', 'visibility']] as const) {
    for (const args of [['create'], ['setup-schema', '-v', '0.0'], ['update-schema', '--schema-name', `postgresql/v12/${dir}`]]) {
      const result = await execa(sqlTool, [...base, '--db', db, ...args], { reject: false, all: true, timeout: 300_000 });
      if (result.exitCode !== 0) throw new Error(`temporal-sql-tool --db ${db} ${args.join(' ')} failed (exit ${result.exitCode}):\n${String(result.all)}`);
    }
  }
}

/** The Temporal server process, restartable on the same ports and database. */
export interface TemporalCluster {
  /** Frontend gRPC address, `127.0.0.1:PORT`. */
  address: string;
  /** Frontend HTTP port (the Web UI server talks gRPC, this is for reference). */
  logFile: string;
  /** Stops the server (SIGTERM, then SIGKILL after 30 s) and starts it again with the same settings. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Runs `temporal-server start` from the server's embedded config template (the same template the
 * `temporalio/server` image renders) with the environment docker-compose.yml gives the `temporal` service:
 * PostgreSQL 12+ persistence and visibility, and deploy/temporal/dynamicconfig.yaml. Every service port is a free
 * one, so the test runs beside anything else on the machine.
 */
export async function startTemporalCluster(binaries: ServerBinaries, pgPort: number, logFile: string): Promise<TemporalCluster> {
  const ports: Record<string, number> = {};
  for (const name of ['FRONTEND_GRPC_PORT', 'FRONTEND_HTTP_PORT', 'FRONTEND_MEMBERSHIP_PORT', 'INTERNAL_FRONTEND_GRPC_PORT', 'INTERNAL_FRONTEND_MEMBERSHIP_PORT', 'INTERNAL_FRONTEND_HTTP_PORT', 'MATCHING_GRPC_PORT', 'MATCHING_MEMBERSHIP_PORT', 'HISTORY_GRPC_PORT', 'HISTORY_MEMBERSHIP_PORT', 'WORKER_GRPC_PORT', 'WORKER_MEMBERSHIP_PORT', 'PPROF_PORT']) {
    ports[name] = await freeLowPort(new Set(Object.values(ports)));
  }
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    // As docker-compose.yml's x-temporal-db and temporal service.
    DB: 'postgres12',
    DB_PORT: String(pgPort),
    // The template reads the visibility store's port from POSTGRES_PORT (compose relies on both defaulting to 5432).
    POSTGRES_PORT: String(pgPort),
    POSTGRES_SEEDS: '127.0.0.1',
    POSTGRES_USER: 'temporal',
    POSTGRES_PWD: 'temporal',
    BIND_ON_IP: '127.0.0.1',
    DYNAMIC_CONFIG_FILE_PATH: DYNAMIC_CONFIG,
    LOG_LEVEL: 'warn',
    ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
  };
  const address = `127.0.0.1:${ports.FRONTEND_GRPC_PORT}`;
  const log = createWriteStream(logFile, { flags: 'a' });
  let child: ResultPromise | undefined;
  const start = async (): Promise<void> => {
    // Exactly what the temporalio/server image's entrypoint runs, with the environment the compose file gives it.
    child = execa(binaries.server, ['start'], { env, extendEnv: false, reject: false, stdin: 'ignore', cleanup: true });
    child.stdout?.pipe(log, { end: false });
    child.stderr?.pipe(log, { end: false });
    await waitForFrontend(address, child, logFile);
  };
  const stop = async (): Promise<void> => {
    if (!child || child.exitCode !== null) return;
    const exited = child;
    child.kill('SIGTERM');
    const timer = setTimeout(() => exited.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  };
  await start();
  return {
    address,
    logFile,
    restart: async () => {
      await stop();
      await start();
    },
    stop: async () => {
      await stop();
      log.end();
    },
  };
}

/** Waits until the frontend answers a health check and namespaces can be listed (the server is fully up). */
async function waitForFrontend(address: string, child: ResultPromise, logFile: string): Promise<void> {
  const deadline = Date.now() + 300_000;
  let last = '';
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`temporal-server exited with ${child.exitCode} while starting:\n${await logTail(logFile)}`);
    try {
      const connection = await Connection.connect({ address, connectTimeout: 5_000 });
      try {
        await connection.workflowService.listNamespaces({});
        return;
      } finally {
        await connection.close();
      }
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(1_000);
  }
  throw new Error(`temporal-server did not answer at ${address} within 300 s (last error: ${last}):\n${await logTail(logFile)}`);
}

async function logTail(file: string): Promise<string> {
  return (await readFile(file, 'utf8').catch(() => '')).split('\n').slice(-40).join('\n');
}

/**
 * What docker-compose.yml's `temporal-setup` service does with the Temporal CLI: the `default` namespace and the
 * search attributes runs are filtered by.
 */
export async function setupNamespace(temporalCli: string, address: string): Promise<void> {
  const cli = (args: string[]) => execa(temporalCli, [...args, '--address', address], { reject: false, all: true, timeout: 60_000 });
  // A new namespace is usable only once the frontend's namespace cache refreshed (compose retries the setup
  // container with `restart: on-failure` for the same reason): retry each step until it holds.
  const until = async (what: string, attempt: () => Promise<{ ok: boolean; output: string }>): Promise<void> => {
    const deadline = Date.now() + 180_000;
    for (;;) {
      const { ok, output } = await attempt();
      if (ok) return;
      if (Date.now() > deadline) throw new Error(`${what}: ${output}`);
      await sleep(2_000);
    }
  };
  await until('cannot create the default namespace', async () => {
    if ((await cli(['operator', 'namespace', 'describe', '--namespace', 'default'])).exitCode === 0) return { ok: true, output: '' };
    const created = await cli(['operator', 'namespace', 'create', '--namespace', 'default', '--retention', '30d']);
    return { ok: false, output: String(created.all) };
  });
  for (const attribute of SEARCH_ATTRIBUTES) {
    const type = attribute.type === 'KEYWORD_LIST' ? 'KeywordList' : attribute.type === 'DOUBLE' ? 'Double' : 'Keyword';
    await until(`cannot create search attribute ${attribute.name}`, async () => {
      const listed = await cli(['operator', 'search-attribute', 'list', '--namespace', 'default']);
      if (listed.exitCode === 0 && new RegExp(`\\b${attribute.name}\\b`).test(String(listed.all))) return { ok: true, output: '' };
      const created = await cli(['operator', 'search-attribute', 'create', '--namespace', 'default', '--name', attribute.name, '--type', type]);
      return { ok: false, output: String(created.all) };
    });
  }
}

/**
 * A free loopback port below 32768: the server stores membership ports in a PostgreSQL `smallint`
 * ("value 34857 is out of range for type smallint"), and Linux hands out ephemeral ports from 32768 up.
 */
async function freeLowPort(taken: Set<number>): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (taken.has(port)) continue;
    const free = await new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
}
