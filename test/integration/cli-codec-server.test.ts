import { defaultPayloadConverter } from '@temporalio/common';
import { execa, type ResultPromise } from 'execa';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { afterEach, describe, expect, test } from 'vitest';
import { CLI, runCli } from './cli-helpers.js';

/*
 * `agent-pipeline codec-server` as a person runs it: the keys from AGENT_PIPELINE_ENCRYPTION_KEY, a port, the Web UI's
 * origin; a malformed key stops it with exit 2 naming the variable, never the key. Issue 33 item 10: it decrypts only
 * for requests that name, in their Host header, a host it was started for, so a web page whose own name was pointed at
 * 127.0.0.1 (DNS rebinding) or a proxy that names the host it dialled gets nothing from it.
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
    const url = await serverUrl(server);
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

  test('refuses with 421 a request whose Host header names another host, and serves the names it was started for', { timeout: 60_000 }, async () => {
    server = execa('node', [CLI, 'codec-server', '--port', '0', '--allowed-host', 'ui.example.com'], { env: { ...baseEnv, AGENT_PIPELINE_ENCRYPTION_KEY: KEY }, extendEnv: false, reject: false });
    const url = await serverUrl(server);
    const port = Number(new URL(url).port);
    const payload = defaultPayloadConverter.toPayload({ secret: 'codec-cli-marker' });
    const plain = { payloads: [{ metadata: { encoding: Buffer.from(payload.metadata!.encoding!).toString('base64') }, data: Buffer.from(payload.data!).toString('base64') }] };
    const sealed = await (await fetch(`${url}/encode`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(plain) })).text();
    // What a rebinding page on evil.example (its name now pointing at 127.0.0.1) would send: refused, nothing decrypted.
    const rebound = await postWithHost(port, `evil.example:${port}`, '/decode', sealed);
    expect(rebound.status).toBe(421);
    expect(rebound.body).not.toContain(plain.payloads[0]!.data);
    // The names of this machine and the one given with --allowed-host are served.
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `ui.example.com:${port}`]) {
      const served = await postWithHost(port, host, '/decode', sealed);
      expect(served.status, host).toBe(200);
      expect(served.body).toContain(plain.payloads[0]!.data);
    }
  });

  test('a malformed key stops it with exit 2, naming the variable and not the key', { timeout: 60_000 }, async () => {
    const result = await runCli(['codec-server', '--port', '0'], { ...baseEnv, AGENT_PIPELINE_ENCRYPTION_KEY: 'k1:c2hvcnQta2V5LXZhbHVl' });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(/\[CONFIG_INVALID\] AGENT_PIPELINE_ENCRYPTION_KEY: key 1 of 1 \("k1"\) is not the base64 of 32 bytes/);
    expect(result.stderr).not.toContain('c2hvcnQta2V5LXZhbHVl');
  });
});

/** The server's URL, once it says it listens. */
function serverUrl(server: ResultPromise): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let seen = '';
    server.stderr!.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      const match = /Codec server at (http:\/\/127\.0\.0\.1:\d+)/.exec(seen);
      if (match) resolve(match[1]!);
    });
    void server.then(() => reject(new Error(`the codec server exited: ${seen}`)));
  });
}

/** A POST to 127.0.0.1:`port` naming `host` in its Host header (fetch always sends the URL's own). */
function postWithHost(port: number, host: string, route: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, path: route, method: 'POST', headers: { Host: host, 'Content-Type': 'application/json' } }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
    });
    request.on('error', reject);
    request.end(body);
  });
}
