import { defaultPayloadConverter } from '@temporalio/common';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allowedHostKeys, startCodecServer, type CodecServer } from '../../src/codec/codec-server.js';
import { payloadCodecsFor } from '../../src/codec/data-converter.js';

const ORIGIN = 'http://localhost:8080';
const TOKEN = 'codec-token-for-the-test';
const MARKER = 'MARKER-codec-server-9c1d';

/** A payload as the Web UI sends it: protobuf JSON, bytes in base64. */
function asJson(value: unknown): { metadata: Record<string, string>; data: string } {
  const payload = defaultPayloadConverter.toPayload(value);
  return {
    metadata: Object.fromEntries(Object.entries(payload.metadata!).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
    data: Buffer.from(payload.data!).toString('base64'),
  };
}

describe('the codec server', () => {
  let server: CodecServer;
  const codecs = payloadCodecsFor(`k1:${randomBytes(32).toString('base64')}`);
  const post = (route: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${server.url}${route}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Namespace': 'default', Authorization: `Bearer ${TOKEN}`, Origin: ORIGIN, ...headers },
      body: JSON.stringify(body),
    });

  beforeAll(async () => {
    server = await startCodecServer({ codecs, port: 0, origin: ORIGIN, token: TOKEN });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('listens on 127.0.0.1 unless told otherwise', () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it('encodes payloads the Web UI sends into ciphertext and decodes them back', async () => {
    const encoded = await post('/encode', { payloads: [asJson({ prompt: MARKER }), asJson('second')] });
    expect(encoded.status).toBe(200);
    expect(encoded.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    const sealed = (await encoded.json()) as { payloads: { metadata: Record<string, string>; data: string }[] };
    expect(sealed.payloads).toHaveLength(2);
    expect(Buffer.from(sealed.payloads[0]!.metadata.encoding!, 'base64').toString()).toBe('binary/encrypted');
    expect(Buffer.from(sealed.payloads[0]!.data, 'base64').includes(MARKER)).toBe(false);

    const decoded = await post('/decode', sealed);
    expect(decoded.status).toBe(200);
    const plain = (await decoded.json()) as { payloads: { metadata: Record<string, string>; data: string }[] };
    expect(plain.payloads[0]).toEqual(asJson({ prompt: MARKER }));
    expect(JSON.parse(Buffer.from(plain.payloads[1]!.data, 'base64').toString())).toBe('second');
  });

  it('refuses a request without the bearer token, or with another one', async () => {
    const missing = await post('/decode', { payloads: [] }, { Authorization: '' });
    expect(missing.status).toBe(401);
    const wrong = await post('/decode', { payloads: [asJson(MARKER)] }, { Authorization: 'Bearer not-the-token' });
    expect(wrong.status).toBe(401);
    expect(await wrong.text()).not.toContain(MARKER);
  });

  it("answers the browser's CORS preflight for the Web UI's origin only", async () => {
    const preflight = (origin: string): Promise<Response> =>
      fetch(`${server.url}/decode`, {
        method: 'OPTIONS',
        headers: { Origin: origin, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type,x-namespace,authorization' },
      });
    const ui = await preflight(ORIGIN);
    expect(ui.status).toBe(204);
    expect(ui.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(ui.headers.get('access-control-allow-methods')).toContain('POST');
    expect(ui.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('x-namespace');
    expect(ui.headers.get('access-control-allow-credentials')).toBe('true');
    const other = await preflight('http://evil.example');
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('says what is wrong with a request it cannot serve', async () => {
    expect((await post('/other', { payloads: [] })).status).toBe(404);
    expect((await post('/decode', { nothing: true })).status).toBe(400);
    const undecryptable = await post('/decode', {
      payloads: [{ metadata: { encoding: Buffer.from('binary/encrypted').toString('base64'), 'encryption-key-id': Buffer.from('gone').toString('base64') }, data: 'AAAA' }],
    });
    expect(undecryptable.status).toBe(400);
    expect(((await undecryptable.json()) as { error: string }).error).toMatch(/key "gone", which AGENT_PIPELINE_ENCRYPTION_KEY does not hold/);
  });

  /** A POST to the server that names `host` in its Host header (fetch always sends the URL's own). */
  const postAs = (host: string, route: string, body: unknown, method = 'POST'): Promise<{ status: number; text: string }> =>
    new Promise((resolve, reject) => {
      const request = http.request(
        { host: '127.0.0.1', port: server.port, path: route, method, headers: { Host: host, 'Content-Type': 'application/json', Authorization: `Bearer ${TOKEN}`, Origin: ORIGIN } },
        (response) => {
          let text = '';
          response.on('data', (chunk: Buffer) => (text += chunk.toString()));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
        },
      );
      request.on('error', reject);
      request.end(method === 'OPTIONS' ? undefined : JSON.stringify(body));
    });

  it('refuses with 421 a request whose Host header names another host (DNS rebinding, a proxy that names what it dialled)', async () => {
    const sealed = (await (await post('/encode', { payloads: [asJson({ prompt: MARKER })] })).json()) as { payloads: unknown[] };
    // The same encrypted payload, asked for under names the server was not started for: nothing decrypted.
    for (const host of [`evil.example:${server.port}`, 'evil.example', `localhost:${server.port + 1}`, `metadata.google.internal:${server.port}`]) {
      const refused = await postAs(host, '/decode', sealed);
      expect(refused.status, host).toBe(421);
      expect(refused.text).not.toContain(Buffer.from(MARKER).toString('base64').slice(0, 12));
      expect(refused.text).toContain('--allowed-host');
    }
    expect((await postAs(`evil.example:${server.port}`, '/decode', {}, 'OPTIONS')).status).toBe(421);
    // The names of this machine, at its port, are served.
    for (const host of [`localhost:${server.port}`, `127.0.0.1:${server.port}`, `[::1]:${server.port}`, `LOCALHOST:${server.port}`]) {
      expect((await postAs(host, '/decode', sealed)).status, host).toBe(200);
    }
  });

  it('serves the names it was started for, at its port unless one is given', () => {
    const keys = allowedHostKeys({ host: '0.0.0.0', allowedHosts: ['ui.example.com', 'proxy.example:443', '::1'] }, 8888);
    expect([...keys].sort()).toEqual(['127.0.0.1:8888', '[::1]:8888', 'localhost:8888', 'proxy.example:443', 'ui.example.com:8888']);
    expect(allowedHostKeys({ host: '10.0.0.5' }, 8888).has('10.0.0.5:8888')).toBe(true);
  });
});
