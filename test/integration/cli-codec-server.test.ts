import { defaultPayloadConverter } from '@temporalio/common';
import { execa, type ResultPromise } from 'execa';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, test } from 'vitest';
import { CLI, runCli } from './cli-helpers.js';

/*
 * `agent-pipeline codec-server` as a person runs it: the keys from AGENT_PIPELINE_ENCRYPTION_KEY, a port, the Web UI's
 * origin; a malformed key stops it with exit 2 naming the variable, never the key.
 */

const KEY = `k1:${randomBytes(32).toString('base64')}`;
const baseEnv = { PATH: process.env.PATH, HOME: process.env.HOME };

describe('agent-pipeline codec-server', () => {
  let server: ResultPromise | undefined;
  afterEach(async () => {
    server?.kill('SIGTERM');
    await server?.catch(() => {});
    server = undefined;
  });

  test('serves encode and decode with the keys of the environment, for the origin given, until SIGTERM', { timeout: 60_000 }, async () => {
    server = execa('node', [CLI, 'codec-server', '--port', '0', '--origin', 'http://localhost:8080/'], {
      env: { ...baseEnv, AGENT_PIPELINE_ENCRYPTION_KEY: KEY },
      extendEnv: false,
      reject: false,
    });
    const url = await new Promise<string>((resolve, reject) => {
      let seen = '';
      server!.stderr!.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        const match = /Codec server at (http:\/\/127\.0\.0\.1:\d+)/.exec(seen);
        if (match) resolve(match[1]!);
      });
      void server!.then(() => reject(new Error(`the codec server exited: ${seen}`)));
    });
    const payload = defaultPayloadConverter.toPayload({ secret: 'codec-cli-marker' });
    const body = { payloads: [{ metadata: { encoding: Buffer.from(payload.metadata!.encoding!).toString('base64') }, data: Buffer.from(payload.data!).toString('base64') }] };
    const headers = { 'Content-Type': 'application/json', 'X-Namespace': 'default', Origin: 'http://localhost:8080' };
    const encoded = await fetch(`${url}/encode`, { method: 'POST', headers, body: JSON.stringify(body) });
    expect(encoded.headers.get('access-control-allow-origin')).toBe('http://localhost:8080');
    const sealed = await encoded.text();
    expect(sealed).not.toContain(Buffer.from('codec-cli-marker').toString('base64'));
    const decoded = (await (await fetch(`${url}/decode`, { method: 'POST', headers, body: sealed })).json()) as typeof body;
    expect(decoded.payloads[0]!.data).toBe(body.payloads[0]!.data);
    server.kill('SIGTERM');
    expect((await server).exitCode).toBe(0);
  });

  test('a malformed key stops it with exit 2, naming the variable and not the key', { timeout: 60_000 }, async () => {
    const result = await runCli(['codec-server', '--port', '0'], { ...baseEnv, AGENT_PIPELINE_ENCRYPTION_KEY: 'k1:c2hvcnQta2V5LXZhbHVl' });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(/\[CONFIG_INVALID\] AGENT_PIPELINE_ENCRYPTION_KEY: key 1 of 1 \("k1"\) is not the base64 of 32 bytes/);
    expect(result.stderr).not.toContain('c2hvcnQta2V5LXZhbHVl');
  });
});
