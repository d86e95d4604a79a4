import { access, mkdir, readFile, stat } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import type { SearchAttributeType } from '@temporalio/common';
import { execa, type Result } from 'execa';
import { SEARCH_ATTRIBUTES } from '../contracts/search-attributes.js';
import { findTemporalCli, resolveStateDir } from './temporal-cli.js';

const HOST = '127.0.0.1';
const SETPRIV = '/usr/bin/setpriv';

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
  /** SQLite file that keeps workflows across restarts; `null` keeps everything in memory. @default `<state dir>/temporal.db` */
  dbFile?: string | null;
  /** Where the server writes its JSON log (level warn); appended to. @default `<state dir>/temporal-server.log` */
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

/** A search attribute to register: what `defineSearchAttributeKey` returns. */
export interface SearchAttributeDefinition {
  readonly name: string;
  readonly type: SearchAttributeType;
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

/** Machine-readable reasons {@link DevServerError} carries in `code`. */
export const DevServerErrorCode = {
  /** Another program holds the gRPC or UI port. */
  PORT_IN_USE: 'DEV_SERVER_PORT_IN_USE',
  /** A Temporal server already answers on the gRPC port. */
  ALREADY_RUNNING: 'DEV_SERVER_ALREADY_RUNNING',
  /** The server process exited before it was ready. */
  EXITED: 'DEV_SERVER_EXITED',
  /** `port` or `uiPort` is not a TCP port number. */
  INVALID_PORT: 'DEV_SERVER_INVALID_PORT',
  /** The server did not answer within `readyTimeoutMs`. */
  NOT_READY: 'DEV_SERVER_NOT_READY',
  /** A search attribute in `dbFile` has another type than the project defines. */
  SEARCH_ATTRIBUTE_CONFLICT: 'DEV_SERVER_SEARCH_ATTRIBUTE_CONFLICT',
} as const;
export type DevServerErrorCode = (typeof DevServerErrorCode)[keyof typeof DevServerErrorCode];

/** Thrown when the dev server cannot be started; `details` holds the tail of the server log when there is one. */
export class DevServerError extends Error {
  constructor(
    readonly code: DevServerErrorCode,
    message: string,
    readonly details?: string,
  ) {
    super(`[${code}] ${message}`);
    this.name = 'DevServerError';
  }
}

// `temporal server start-dev --search-attribute Name=Type` spellings, and the proto IndexedValueType numbers
// the operator service speaks (temporal.api.enums.v1.IndexedValueType).
const ATTRIBUTE_TYPES: Record<SearchAttributeType, { flag: string; indexed: number }> = {
  TEXT: { flag: 'Text', indexed: 1 },
  KEYWORD: { flag: 'Keyword', indexed: 2 },
  INT: { flag: 'Int', indexed: 3 },
  DOUBLE: { flag: 'Double', indexed: 4 },
  BOOL: { flag: 'Bool', indexed: 5 },
  DATETIME: { flag: 'Datetime', indexed: 6 },
  KEYWORD_LIST: { flag: 'KeywordList', indexed: 7 },
};

/**
 * Starts `temporal server start-dev` on 127.0.0.1 with the project's search attributes and resolves once it
 * serves the namespace. Starting again with the same `dbFile` keeps workflows and schedules. The server gets
 * SIGTERM if this process dies (via `setpriv --pdeathsig` where available, and execa's exit cleanup).
 * @throws {DevServerError} with `code` INVALID_PORT, PORT_IN_USE or ALREADY_RUNNING before spawning; EXITED, NOT_READY or
 *   SEARCH_ATTRIBUTE_CONFLICT after (the process is stopped first).
 */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  const env = options.env ?? process.env;
  const stateDir = resolveStateDir(env);
  const namespace = options.namespace ?? 'default';
  const headless = options.headless ?? false;
  const autoPort = options.port === 'auto' || options.port === 0;
  const port = autoPort ? await pickFreePort() : typeof options.port === 'number' ? options.port : 7233;
  const uiPort = headless ? undefined : options.uiPort ?? (autoPort ? await pickFreePort() : port + 1000);
  assertValidPort('port', port);
  if (uiPort !== undefined) assertValidPort('uiPort', uiPort);
  const dbFile = options.dbFile === null ? undefined : path.resolve(options.dbFile ?? path.join(stateDir, 'temporal.db'));
  const logFile = path.resolve(options.logFile ?? path.join(stateDir, 'temporal-server.log'));
  const attributes = options.searchAttributes ?? SEARCH_ATTRIBUTES;
  const address = `${HOST}:${port}`;

  await assertPortsFree(address, port, uiPort);
  const cli = options.temporalCli ?? (await findTemporalCli({ env, log: options.log }));
  // The server checks that the database's folder exists but does not create it.
  if (dbFile) await mkdir(path.dirname(dbFile), { recursive: true });
  await mkdir(path.dirname(logFile), { recursive: true });

  const args = ['server', 'start-dev', '--ip', HOST, '--port', String(port), '--namespace', namespace];
  args.push(...(uiPort === undefined ? ['--headless'] : ['--ui-port', String(uiPort)]));
  if (uiPort !== undefined && options.uiCodecEndpoint) args.push('--ui-codec-endpoint', options.uiCodecEndpoint);
  if (dbFile) args.push('--db-filename', dbFile);
  args.push('--log-level', 'warn', '--log-format', 'json');
  // Offline machines would otherwise log failed calls to Temporal's version-check service.
  args.push('--dynamic-config-value', 'frontend.enableServerVersionCheck=false');
  // The workflow task that schedules a stage brings its activity task back to the same worker: no poll round trip.
  args.push('--dynamic-config-value', 'system.enableActivityEagerExecution=true');
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
  const exited = subprocess.then((result) => {
    exit = result;
  });

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
    uiUrl: uiPort === undefined ? undefined : `http://${HOST}:${uiPort}`,
    namespace,
    dbFile,
    logFile,
    pid: subprocess.pid ?? -1,
    stop,
  };
}

async function waitUntilReady(
  address: string,
  namespace: string,
  port: number,
  deadline: number,
  getExit: () => Result | undefined,
  logFile: string,
  logStart: number,
): Promise<Connection> {
  let lastError: unknown;
  for (;;) {
    const exit = getExit();
    if (exit) {
      const tail = await readLogTail(logFile, logStart);
      throw new DevServerError(
        DevServerErrorCode.EXITED,
        `The Temporal dev server for ${address} exited (${exit.signal ?? `exit code ${exit.exitCode}`}) before it was ready: ${lastLogMessage(tail)}. ` +
          `Full log: ${logFile}. If a port is taken, choose another one (\`--port N\`, or port: 'auto').`,
        tail,
      );
    }
    if (Date.now() > deadline) {
      throw new DevServerError(
        DevServerErrorCode.NOT_READY,
        `The Temporal dev server at ${address} did not become ready in time (last error: ${lastError instanceof Error ? lastError.message : String(lastError)}). ` +
          `See ${logFile}; on a slow machine raise readyTimeoutMs.`,
        await readLogTail(logFile, logStart),
      );
    }
    // Probe the socket cheaply first: a gRPC channel that saw "connection refused" backs off for a second or more.
    if (await canConnect(port)) {
      const connection = Connection.lazy({ address, connectTimeout: Math.max(1_000, Math.min(5_000, deadline - Date.now())) });
      try {
        await connection.ensureConnected();
        await connection.workflowService.describeNamespace({ namespace });
        return connection;
      } catch (error) {
        lastError = error;
        await connection.close();
      }
    }
    await sleep(100);
  }
}

/**
 * The server registers `--search-attribute`s only when it creates the database, so a `dbFile` from before an
 * attribute was added would silently lack it; add the missing ones through the operator service.
 */
async function registerMissingAttributes(
  connection: Connection,
  namespace: string,
  attributes: readonly SearchAttributeDefinition[],
  dbFile: string | undefined,
): Promise<void> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  const missing: Record<string, number> = {};
  for (const key of attributes) {
    const existing = customAttributes?.[key.name];
    const wanted = ATTRIBUTE_TYPES[key.type].indexed;
    if (existing === undefined || existing === null) {
      missing[key.name] = wanted;
    } else if (existing !== wanted) {
      throw new DevServerError(
        DevServerErrorCode.SEARCH_ATTRIBUTE_CONFLICT,
        `Search attribute ${key.name} is registered in ${dbFile ?? 'the database'} with indexed type ${existing}, but the project defines it as ${key.type}. ` +
          `Delete that database file (losing its workflows) or start with another dbFile.`,
      );
    }
  }
  if (Object.keys(missing).length > 0) await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing });
}

function assertValidPort(option: string, port: number): void {
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new DevServerError(DevServerErrorCode.INVALID_PORT, `${option} ${port} is not a TCP port; use an integer from 1 to 65535 (or port: 'auto').`);
  }
}

async function assertPortsFree(address: string, port: number, uiPort: number | undefined): Promise<void> {
  if (!(await isPortFree(port))) {
    if (await isTemporalServer(address)) {
      throw new DevServerError(
        DevServerErrorCode.ALREADY_RUNNING,
        `A Temporal server is already running at ${address}. Use it (TEMPORAL_ADDRESS=${address}), stop it, or choose another port (\`--port N\`, or port: 'auto').`,
      );
    }
    throw new DevServerError(DevServerErrorCode.PORT_IN_USE, `Port ${port} on ${HOST} is in use by another program. Stop it or choose another port (\`--port N\`, or port: 'auto').`);
  }
  if (uiPort !== undefined && !(await isPortFree(uiPort))) {
    throw new DevServerError(
      DevServerErrorCode.PORT_IN_USE,
      `Web UI port ${uiPort} on ${HOST} is in use by another program. Choose another UI port (uiPort), or run headless.`,
    );
  }
}

async function isTemporalServer(address: string): Promise<boolean> {
  // Not Connection.connect(): when it fails it leaves its channel open, holding a socket to whatever listens.
  const connection = Connection.lazy({ address, connectTimeout: 2_000 });
  try {
    await connection.ensureConnected();
    return true;
  } catch {
    return false;
  } finally {
    await connection.close();
  }
}

function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (error: NodeJS.ErrnoException) => (error.code === 'EADDRINUSE' || error.code === 'EACCES' ? resolve(false) : reject(error)));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

function pickFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: HOST });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
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

async function readLogTail(logFile: string, from: number): Promise<string> {
  const text = await readFile(logFile, 'utf8').catch(() => '');
  return text.slice(from).split('\n').filter(Boolean).slice(-20).join('\n');
}

/** The `msg` of the last ERROR line of the JSON log (the fatal one, when the server exits), else the last line. */
function lastLogMessage(tail: string): string {
  const lines = tail.split('\n').filter(Boolean);
  const parsed = lines.map((line) => {
    try {
      return JSON.parse(line) as { level?: unknown; msg?: unknown };
    } catch {
      return { msg: line };
    }
  });
  const fatal = parsed.findLast((entry) => entry.level === 'ERROR') ?? parsed.at(-1);
  return fatal === undefined ? '(the log is empty)' : String(fatal.msg ?? JSON.stringify(fatal));
}
