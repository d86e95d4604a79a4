import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { findTemporalCli } from '../../src/dev/temporal-cli.js';
import { TEST_SANDBOX_MODE } from '../helpers/sandbox-host.js';
import { runCli } from './cli-helpers.js';

/** Whether nothing listens on `port` of the loopback address now. */
function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A gRPC port the system picked, whose Web UI port (port + 1000) is free too. */
async function freePorts(): Promise<number> {
  for (;;) {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    if (port + 1000 <= 65_535 && (await isFree(port + 1000))) return port;
  }
}

/*
 * `agent-pipeline demo` as a person runs it: the embedded dev server, the scripted model server (no API key), the
 * real claude binary, and the run to its end (`--exit`, and stdin is no terminal). The Web UI's address is printed
 * twice, when the server starts and with the run's link: it said http://127.0.0.1:PORT, then http://localhost:PORT.
 */
describe('agent-pipeline demo', () => {
  let scratch: string;
  beforeAll(async () => {
    scratch = await mkdtemp(path.join(tmpdir(), 'demo-command-'));
  });
  afterAll(async () => rm(scratch, { recursive: true, force: true }));

  test('runs the demo and names the Web UI by one address, the one its server listens on', { timeout: 300_000 }, async () => {
    const port = await freePorts();
    const { ANTHROPIC_API_KEY: _key, TEMPORAL_ADDRESS: _address, AGENT_PIPELINE_WEB_UI: _ui, ...inherited } = process.env;
    const env = {
      ...inherited,
      TEMPORAL_CLI: await findTemporalCli(),
      AGENT_PIPELINE_HOME: scratch,
      AGENT_PIPELINE_WORKSPACES: path.join(scratch, 'workspaces'),
      AGENT_PIPELINE_SANDBOX: TEST_SANDBOX_MODE,
    };
    const result = await runCli(['demo', '--exit', '--port', String(port)], env, 280_000);
    expect(result.exitCode, result.all).toBe(0);
    const ui = `http://127.0.0.1:${port + 1000}`;
    expect(result.stderr).toContain(`Temporal dev server on 127.0.0.1:${port}; Web UI ${ui};`);
    expect(result.stdout).toMatch(new RegExp(`^Web UI: ${ui.replaceAll('.', '\\.')}/namespaces/default/workflows/demo-\\S+$`, 'm'));
    // Every address of the UI's port is that one.
    const addresses = [...result.all.matchAll(new RegExp(`http://[^/\\s]+:${port + 1000}`, 'g'))].map((m) => m[0]);
    expect(new Set(addresses)).toEqual(new Set([ui]));
    expect(result.all).not.toContain('localhost');
  });
});
