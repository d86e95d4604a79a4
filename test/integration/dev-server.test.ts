import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { SearchAttributeType } from '@temporalio/common';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { startDevServer, type DevServer, type DevServerOptions } from '../../src/dev/dev-server.js';
import { DevServerErrorCode } from '../../src/dev/dev-server-error.js';
import { findTemporalCli } from '../../src/dev/temporal-cli.js';
import { COST_USD_ATTRIBUTE, SEARCH_ATTRIBUTES } from '../../src/contracts/search-attributes.js';
import { isAlive } from '../helpers/process-alive.js';

// IndexedValueType numbers the operator service reports (temporal.api.enums.v1.IndexedValueType).
const INDEXED_TYPE: Record<SearchAttributeType, number> = { TEXT: 1, KEYWORD: 2, INT: 3, DOUBLE: 4, BOOL: 5, DATETIME: 6, KEYWORD_LIST: 7 };

let scratch: string;
let temporalCli: string;
const servers: DevServer[] = [];

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'dev-server-test-'));
  temporalCli = await findTemporalCli();
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function start(options: DevServerOptions): Promise<DevServer> {
  const server = await startDevServer({ port: 'auto', headless: true, temporalCli, logFile: path.join(scratch, 'temporal-server.log'), ...options });
  servers.push(server);
  return server;
}

async function withConnection<T>(address: string, fn: (connection: Connection) => Promise<T>): Promise<T> {
  const connection = await Connection.connect({ address });
  try {
    return await fn(connection);
  } finally {
    await connection.close();
  }
}

describe('startDevServer', () => {
  test('starts a server on a free port with the project search attributes registered', async () => {
    const startedAt = Date.now();
    const server = await start({ dbFile: path.join(scratch, 'attributes.db') });
    console.info(`dev server ready in ${Date.now() - startedAt} ms at ${server.address}`);

    expect(server.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(server.namespace).toBe('default');
    expect(server.uiUrl).toBeUndefined();
    const { customAttributes } = await withConnection(server.address, (c) => c.operatorService.listSearchAttributes({ namespace: 'default' }));
    expect(customAttributes).toMatchObject(Object.fromEntries(SEARCH_ATTRIBUTES.map((key) => [key.name, INDEXED_TYPE[key.type]])));
    expect(customAttributes).toMatchObject({ AgentPipeline: INDEXED_TYPE.KEYWORD, AgentPipelineCostUsd: INDEXED_TYPE.DOUBLE });
  });

  test('serves the Web UI when not headless', async () => {
    const server = await start({ headless: false, dbFile: null });
    expect(server.uiUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const response = await fetch(server.uiUrl!);
    expect(response.status).toBe(200);
  });

  test('keeps workflows across a restart with the same db file', async () => {
    const dbFile = path.join(scratch, 'restart.db');
    const first = await start({ dbFile });
    const workflowId = `survives-restart-${Date.now()}`;
    await withConnection(first.address, async (connection) => {
      // A workflow type nobody polls for stays RUNNING: all we need is state in the database.
      await new Client({ connection }).workflow.start('NobodyPollsThisWorkflow', { taskQueue: 'nobody-polls-this', workflowId });
    });
    await first.stop();
    expect(isAlive(first.pid)).toBe(false);

    const second = await start({ dbFile });
    const description = await withConnection(second.address, (connection) => new Client({ connection }).workflow.getHandle(workflowId).describe());
    expect(description.status.name).toBe('RUNNING');
  });

  test('one database per server: a second server on a live one\'s file is refused, a dead one\'s lock is taken over (issue 34)', async () => {
    const home = path.join(scratch, 'home');
    const first = await start({ env: { ...process.env, AGENT_PIPELINE_HOME: home } });
    expect(first.dbFile).toBe(path.join(home, `temporal-${first.address.split(':')[1]}.db`));
    const lock = JSON.parse(await readFile(`${first.dbFile}.lock`, 'utf8')) as { pid: number; serverPid: number };
    expect(lock).toMatchObject({ pid: process.pid, serverPid: first.pid });
    await expect(startDevServer({ port: 'auto', headless: true, dbFile: first.dbFile!, temporalCli })).rejects.toMatchObject({
      code: DevServerErrorCode.DB_IN_USE,
      message: expect.stringContaining(`in use by the dev server at ${first.address}`),
    });
    await first.stop();
    await expect(readFile(`${first.dbFile}.lock`, 'utf8')).rejects.toMatchObject({ code: 'ENOENT' });

    // A server killed with its starter leaves its lock behind: nobody alive holds it, so the next server takes it.
    await writeFile(`${first.dbFile}.lock`, JSON.stringify({ pid: 2 ** 22 + 1, serverPid: 2 ** 22 + 2, address: 'gone' }));
    const next = await start({ dbFile: first.dbFile! });
    expect(next.dbFile).toBe(first.dbFile);
  });

  test('adds search attributes that a db file from before they existed lacks', async () => {
    const dbFile = path.join(scratch, 'older.db');
    const older = await start({ dbFile, searchAttributes: SEARCH_ATTRIBUTES.filter((key) => key !== COST_USD_ATTRIBUTE) });
    await older.stop();

    const current = await start({ dbFile });
    const { customAttributes } = await withConnection(current.address, (c) => c.operatorService.listSearchAttributes({ namespace: 'default' }));
    expect(customAttributes?.AgentPipelineCostUsd).toBe(INDEXED_TYPE.DOUBLE);
  });

  test('refuses a port where a Temporal server already runs, naming the port and how to change it', async () => {
    const running = await start({ dbFile: null });
    const port = Number(running.address.split(':')[1]);

    const attempt = startDevServer({ port, headless: true, dbFile: null, temporalCli });
    await expect(attempt).rejects.toMatchObject({ code: DevServerErrorCode.ALREADY_RUNNING });
    await expect(attempt).rejects.toThrow(new RegExp(`already running at 127\\.0\\.0\\.1:${port}.*--port`));
  });

  test('refuses a port another program holds', async () => {
    const sockets = new Set<net.Socket>();
    const blocker = net.createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const { port } = blocker.address() as net.AddressInfo;
    try {
      const attempt = startDevServer({ port, headless: true, dbFile: null, temporalCli });
      await expect(attempt).rejects.toMatchObject({ code: DevServerErrorCode.PORT_IN_USE });
      await expect(attempt).rejects.toThrow(`Port ${port} on 127.0.0.1 is in use`);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  test('rejects a port number that is no TCP port before spawning anything', async () => {
    await expect(startDevServer({ port: 70_000, temporalCli })).rejects.toThrow('[DEV_SERVER_INVALID_PORT] port 70000 is not a TCP port');
    // The UI port defaults to port + 1000, which must be a port too.
    await expect(startDevServer({ port: 65_000, temporalCli })).rejects.toThrow('uiPort 66000 is not a TCP port');
  });

  test('reports the server error when the process exits before it is ready', async () => {
    // A directory is no SQLite file: the server exits at once with "unable to open database file".
    const attempt = startDevServer({ port: 'auto', headless: true, dbFile: scratch, temporalCli, logFile: path.join(scratch, 'exits.log') });
    await expect(attempt).rejects.toMatchObject({ code: DevServerErrorCode.EXITED });
    await expect(attempt).rejects.toThrow(/exited \(exit code 1\) before it was ready: .*database file/);
  });

  test('stop() is idempotent and ends the process', async () => {
    const server = await start({ dbFile: null });
    await Promise.all([server.stop(), server.stop()]);
    expect(isAlive(server.pid)).toBe(false);
  });
});
