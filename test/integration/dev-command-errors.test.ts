import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { findTemporalCli } from '../../src/dev/temporal-cli.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { runCli } from './cli-helpers.js';

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Whether something still listens on `port` (a Temporal server the command left behind). */
async function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => resolve(socket.destroy() === socket));
    socket.on('error', () => resolve(false));
  });
}

describe('agent-pipeline dev refused at its start', () => {
  let scratch: string;
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    scratch = await mkdtemp(path.join(tmpdir(), 'dev-command-errors-'));
    // No model key (so the scenario is used), the machine's Temporal CLI, and the server's state in the scratch folder.
    env = { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_CLI: await findTemporalCli(), AGENT_PIPELINE_HOME: scratch };
  });
  afterAll(async () => rm(scratch, { recursive: true, force: true }));

  test('a scenario file that is not there exits 2 naming it, before any server starts', async () => {
    const port = await freePort();
    const result = await runCli(['dev', '--port', String(port), '--scenario', 'no-such-scenario.yaml'], env, 60_000);
    expect(result.stderr).toContain('[SCENARIO_INVALID] no-such-scenario.yaml');
    // Before: the error was printed, and the command hung with the dev server running until it was killed.
    expect(result.exitCode).toBe(2);
    expect(result.stderr).not.toContain('Temporal dev server on');
    expect(await listening(port)).toBe(false);
  });

  test('a worker setting refused after the server started exits 2 and stops the server', async () => {
    const port = await freePort();
    const scenario = path.join(PROJECT_ROOT, 'examples', 'demo', 'scenario.yaml');
    const result = await runCli(['dev', '--port', String(port), '--scenario', scenario], { ...env, AGENT_PIPELINE_SANDBOX: 'bogus' }, 60_000);
    expect(result.stderr).toContain(`Temporal dev server on 127.0.0.1:${port}`);
    // `dev`'s own default, not a worker's (`required`), which is what unsetting it gives here.
    expect(result.stderr).toContain('[CONFIG_INVALID] AGENT_PIPELINE_SANDBOX=bogus is not one of required, permissive, auto, off; unset it for the default (auto)');
    expect(result.exitCode).toBe(2);
    expect(await listening(port)).toBe(false);
  });
});
