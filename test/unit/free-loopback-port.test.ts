import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { describe, expect, test } from 'vitest';
import { freeLoopbackPort } from '../../src/telemetry/metrics-server.js';

/** The states of the IPv4 TCP sockets whose local port is `port` (/proc/net/tcp: `06` is TIME_WAIT). */
async function socketStates(port: number): Promise<string[]> {
  const table = await readFile('/proc/net/tcp', 'utf8');
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  return table
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields[1]?.endsWith(hex))
    .map((fields) => fields[3]!);
}

describe.skipIf(process.platform !== 'linux')('a free loopback port', () => {
  test('is kept from the next bind(:0) by a TIME_WAIT on it, and an explicit listen still takes it', async () => {
    const port = await freeLoopbackPort();
    // The dev server's own services pick their ports with bind(:0) a moment after ours is chosen.
    expect(await socketStates(port)).toContain('06');
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
    await new Promise((resolve) => server.close(resolve));
  });
});
