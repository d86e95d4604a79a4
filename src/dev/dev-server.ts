import { access, mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { execa, type Result } from 'execa';
import { SEARCH_ATTRIBUTES } from '../contracts/search-attributes.js';
import { ATTRIBUTE_TYPES, registerMissingAttributes, type SearchAttributeDefinition } from './dev-server-search-attributes.js';
import { assertPortsFree, assertValidPort, DEV_SERVER_HOST, pickFreePort } from './dev-server-ports.js';
import { waitUntilReady } from './dev-server-readiness.js';
import { findTemporalCli, resolveStateDir } from './temporal-cli.js';
import { lockDatabase } from './dev-server-lock.js';

const SETPRIV = '/usr/bin/setpriv';
const DEFAULT_PORT = 7233;

/** Options for {@link startDevServer}. */
export interface DevServerOptions {
  /** Front-end gRPC port on 127.0.0.1; `0` or `'auto'` picks a free one. @default 7233 */
  port?: number | 'auto';
  /** Web UI port. @default `port` + 1000, or a free port when `port` is picked automatically */
  uiPort?: number;
  /** Run without the Web UI; `uiUrl` is then undefined. @default false */
  headless?: boolean;
  /** The remote codec the Web UI decodes payloads with (`agent-pipeline codec-server`), e.g. `http://127.0.0.1:8888`. */
  uiCodecEndpoint?: string;
  /**
   * SQLite file that keeps workflows across restarts; `null` keeps everything in memory. One server at a time: a
   * second server on the same file is refused (`DEV_SERVER_DB_IN_USE`). The state folder is `AGENT_PIPELINE_HOME`,
   * else `.agent-pipeline/` in the current folder.
   * @default `<state folder>/temporal.db` on port 7233, `<state folder>/temporal-<port>.db` on any other
   */
  dbFile?: string | null;
  /** Where the server writes its JSON log (level warn); appended to. @default `temporal-server.log` (`temporal-server-<port>.log` off 7233) in the state folder */
  logFile?: string;
  /** Namespace created at launch and checked for readiness. @default 'default' */
  namespace?: string;
  /** Search attributes registered on the namespace, including ones missing from an older `dbFile`. @default SEARCH_ATTRIBUTES */
  searchAttributes?: readonly SearchAttributeDefinition[];
  /** How long to wait for the server to answer. @unit milliseconds @default 60_000 */
  readyTimeoutMs?: number;
  /** How long `stop()` waits after SIGTERM before it sends SIGKILL. @unit milliseconds @default 10_000 */
  stopGraceMs?: number;
  /** The `temporal` binary. @default the result of `findTemporalCli({ env, log })` */
  temporalCli?: string;
  /** Environment for finding the CLI and `AGENT_PIPELINE_HOME`. @default process.env */
  env?: NodeJS.ProcessEnv;
  /** Receives progress lines (a first-run CLI build). @default writes each line to stderr */
  log?: (line: string) => void;
}

/** A running `temporal server start-dev`, started by {@link startDevServer}. */
export interface DevServer {
  /** gRPC address for `Connection.connect({ address })`, e.g. `127.0.0.1:7233`. */
  readonly address: string;
  /** The Web UI, e.g. `http://127.0.0.1:8233`; undefined when headless. */
  readonly uiUrl?: string;
  readonly namespace: string;
  /** The SQLite file; undefined when in memory. */
  readonly dbFile?: string;
  readonly logFile: string;
  readonly pid: number;
  /** Sends SIGTERM, then SIGKILL after `stopGraceMs`; resolves once the process has exited. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Starts `temporal server start-dev` on 127.0.0.1 with the project's search attributes and resolves once it
 * serves the namespace. Starting again with the same `dbFile` keeps workflows and schedules. The server gets
 * SIGTERM if this process dies (via `setpriv --pdeathsig` where available, and execa's exit cleanup).
 * @throws {DevServerError} with `code` INVALID_PORT, PORT_IN_USE or ALREADY_RUNNING before spawning; EXITED, NOT_READY or
 *   SEARCH_ATTRIBUTE_CONFLICT after (the process is stopped first); DB_IN_USE when another live server holds `dbFile`.
 */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  const env = options.env ?? process.env;
  const stateDir = resolveStateDir(env);
  const namespace = options.namespace ?? 'default';
  const headless = options.headless ?? false;
  const autoPort = options.port === 'auto' || options.port === 0;
  const port = autoPort ? await pickFreePort() : typeof options.port === 'number' ? options.port : DEFAULT_PORT;
  const uiPort = headless ? undefined : options.uiPort ?? (autoPort ? await pickFreePort() : port + 1000);
  assertValidPort('port', port);
  if (uiPort !== undefined) assertValidPort('uiPort', uiPort);
  // One database per port: two servers on one SQLite file would mix (and corrupt) each other's runs.
  const suffix = port === DEFAULT_PORT ? '' : `-${port}`;
  const dbFile = options.dbFile === null ? undefined : path.resolve(options.dbFile ?? path.join(stateDir, `temporal${suffix}.db`));
  const logFile = path.resolve(options.logFile ?? path.join(stateDir, `temporal-server${suffix}.log`));
  const attributes = options.searchAttributes ?? SEARCH_ATTRIBUTES;
  const address = `${DEV_SERVER_HOST}:${port}`;

  await assertPortsFree(address, port, uiPort);
  const cli = options.temporalCli ?? (await findTemporalCli({ env, log: options.log }));
  // The server checks that the database's folder exists but does not create it.
  if (dbFile) await mkdir(path.dirname(dbFile), { recursive: true });
  await mkdir(path.dirname(logFile), { recursive: true });
  const lock = dbFile ? await lockDatabase(dbFile, address) : undefined;

  const args = ['server', 'start-dev', '--ip', DEV_SERVER_HOST, '--port', String(port), '--namespace', namespace];
  args.push(...(uiPort === undefined ? ['--headless'] : ['--ui-port', String(uiPort)]));
  if (uiPort !== undefined && options.uiCodecEndpoint) args.push('--ui-codec-endpoint', options.uiCodecEndpoint);
  if (dbFile) args.push('--db-filename', dbFile);
  args.push('--log-level', 'warn', '--log-format', 'json');
  // Offline machines would otherwise log failed calls to Temporal's version-check service.
  args.push('--dynamic-config-value', 'frontend.enableServerVersionCheck=false');
  // The workflow task that schedules a stage brings its activity task back to the same worker: no poll round trip.
  args.push('--dynamic-config-value', 'system.enableActivityEagerExecution=true');
  // A deleted run is gone in seconds, not half a minute: the server deletes a closed run only once its queue's ack
  // level shows the close done, and writes that level every 30 s by default (a store sweep waits on the deletion).
  args.push('--dynamic-config-value', 'history.transferProcessorUpdateAckInterval="1s"');
  for (const key of attributes) args.push('--search-attribute', `${key.name}=${ATTRIBUTE_TYPES[key.type].flag}`);

  const logStart = (await stat(logFile).catch(() => undefined))?.size ?? 0;
  const [command, commandArgs]: [string, string[]] = (await canUsePdeathsig()) ? [SETPRIV, ['--pdeathsig', 'TERM', '--', cli, ...args]] : [cli, args];
  const startedAt = Date.now();
  const subprocess = execa(command, commandArgs, {
    stdin: 'ignore',
    stdout: { file: logFile, append: true },
    stderr: { file: logFile, append: true },
    reject: false,
    forceKillAfterDelay: options.stopGraceMs ?? 10_000,
  });
  let exit: Result | undefined;
  const exited = subprocess.then(async (result) => {
    exit = result;
    await lock?.release();
  });
  if (subprocess.pid !== undefined) await lock?.setServerPid(subprocess.pid);

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      if (!exit) subprocess.kill('SIGTERM');
      await exited;
    })());

  try {
    const deadline = startedAt + (options.readyTimeoutMs ?? 60_000);
    const connection = await waitUntilReady(address, namespace, port, deadline, () => exit, logFile, logStart);
    try {
      await registerMissingAttributes(connection, namespace, attributes, dbFile);
    } finally {
      await connection.close();
    }
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    address,
    uiUrl: uiPort === undefined ? undefined : `http://${DEV_SERVER_HOST}:${uiPort}`,
    namespace,
    dbFile,
    logFile,
    pid: subprocess.pid ?? -1,
    stop,
  };
}

let pdeathsigSupport: Promise<boolean> | undefined;
/** Whether util-linux `setpriv --pdeathsig` works here, so the server dies with us even on SIGKILL. */
function canUsePdeathsig(): Promise<boolean> {
  pdeathsigSupport ??= access(SETPRIV)
    .then(() => execa(SETPRIV, ['--pdeathsig', 'TERM', '--', process.execPath, '--version'], { reject: false, timeout: 10_000 }))
    .then((result) => !result.failed)
    .catch(() => false);
  return pdeathsigSupport;
}
