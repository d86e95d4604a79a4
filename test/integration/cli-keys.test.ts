import { readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { parseSigningKey, publicKeyLine } from '../../src/trust/keys.js';
import { testFolder } from '../helpers/test-folder.js';
import { runCli } from './cli-helpers.js';

/* `agent-pipeline keys generate` as a user runs it (no Temporal server needed). */

describe('agent-pipeline keys generate', () => {
  test('prints the private line and the public line to trust; --out writes the private line to a 0600 file and prints only the public one', async () => {
    const printed = await runCli(['keys', 'generate', '--id', 'ci-key'], { PATH: process.env.PATH });
    expect(printed.exitCode, printed.all).toBe(0);
    const privateLine = /^AGENT_PIPELINE_SIGNING_KEY="(ci-key:[^"]+)"$/m.exec(printed.stdout)![1];
    const publicLine = /^AGENT_PIPELINE_TRUSTED_KEYS="(ci-key:[^"]+)"$/m.exec(printed.stdout)![1];
    expect(publicKeyLine(parseSigningKey(privateLine))).toBe(publicLine);

    // It holds a private key: removed when the test ends.
    const dir = await testFolder('keys-');
    const file = path.join(dir, 'signing.env');
    const written = await runCli(['keys', 'generate', 'signing', '--out', file, '--json'], { PATH: process.env.PATH });
    expect(written.exitCode, written.all).toBe(0);
    const json = JSON.parse(written.stdout) as { privateKey?: string; publicKey: string; file: string };
    expect(json.privateKey).toBeUndefined();
    expect(json.file).toBe(file);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const line = /^AGENT_PIPELINE_SIGNING_KEY="([^"]+)"$/m.exec(await readFile(file, 'utf8'))![1];
    expect(written.all).not.toContain(line.split(':')[1]);
    expect(publicKeyLine(parseSigningKey(line))).toBe(json.publicKey);

    // A key that cannot be read stops a client before it connects, naming the variable, never quoting the value.
    const bad = await runCli(['list'], { PATH: process.env.PATH, AGENT_PIPELINE_SIGNING_KEY: 'ci:secret-looking-value!' });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain('[CONFIG_INVALID] AGENT_PIPELINE_SIGNING_KEY: a signing key is written <keyId>:<base64>');
    expect(bad.all).not.toContain('secret-looking-value');

    // An existing file may hold the key in use: never replaced.
    await writeFile(path.join(dir, 'taken'), 'keep');
    const refused = await runCli(['keys', 'generate', 'encryption', '--out', path.join(dir, 'taken')], { PATH: process.env.PATH });
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toContain('exists already');
    expect(await readFile(path.join(dir, 'taken'), 'utf8')).toBe('keep');
  });
});
