import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { findTemporalCli, resolveCliCacheDir, resolveStateDir, TemporalCliNotFoundError } from '../../src/dev/temporal-cli.js';

// Nothing listens on port 9 (discard) here, so a download attempt fails at once instead of reaching the network.
const UNREACHABLE_URL = 'http://127.0.0.1:9/temporal.tar.gz';

let scratch: string;
let home: string;
let emptyDir: string;

beforeEach(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'temporal-cli-test-'));
  home = path.join(scratch, 'home');
  emptyDir = path.join(scratch, 'empty');
  await mkdir(emptyDir, { recursive: true });
});

afterEach(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function writeExecutable(file: string, text: string): Promise<string> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, text);
  await chmod(file, 0o755);
  return file;
}

/** A stand-in `temporal` that answers `--version` like the real one; shell builtins only, so PATH does not matter. */
function fakeTemporal(file: string, label: string): Promise<string> {
  return writeExecutable(file, `#!/bin/sh\necho "temporal version 0.0.0-${label} (Server 0, UI 0)"\n`);
}

/** A stand-in `go` that logs its arguments to `calls`, takes a moment, and "installs" a fake temporal into $GOBIN. */
function fakeGo(dir: string, calls: string): Promise<string> {
  const script = `#!${process.execPath}
const fs = require('node:fs');
fs.appendFileSync(${JSON.stringify(calls)}, JSON.stringify(process.argv.slice(2)) + '\\n');
process.stderr.write('go: downloading github.com/temporalio/cli v1.5.1\\n');
setTimeout(() => {
  fs.writeFileSync(process.env.GOBIN + '/temporal', '#!/bin/sh\\necho "temporal version 0.0.0-built"\\n', { mode: 0o755 });
}, 300);
`;
  return writeExecutable(path.join(dir, 'go'), script);
}

describe('findTemporalCli', () => {
  test('TEMPORAL_CLI wins over PATH and the cache', async () => {
    const explicit = await fakeTemporal(path.join(scratch, 'explicit', 'temporal'), 'explicit');
    await fakeTemporal(path.join(scratch, 'path', 'temporal'), 'path');
    await fakeTemporal(path.join(home, 'bin', 'temporal'), 'cache');

    const env = { TEMPORAL_CLI: explicit, PATH: path.join(scratch, 'path'), AGENT_PIPELINE_HOME: home };
    await expect(findTemporalCli({ env, provision: false })).resolves.toBe(explicit);
  });

  test('a TEMPORAL_CLI that does not run is an error naming it, not a reason to look elsewhere', async () => {
    await fakeTemporal(path.join(scratch, 'path', 'temporal'), 'path');
    const env = { TEMPORAL_CLI: path.join(scratch, 'missing'), PATH: path.join(scratch, 'path'), AGENT_PIPELINE_HOME: home };
    await expect(findTemporalCli({ env })).rejects.toThrow(/TEMPORAL_CLI=.*missing: does not exist.*unset it/);
  });

  test('PATH wins over the cache', async () => {
    const onPath = await fakeTemporal(path.join(scratch, 'path', 'temporal'), 'path');
    await fakeTemporal(path.join(home, 'bin', 'temporal'), 'cache');
    await expect(findTemporalCli({ env: { PATH: path.join(scratch, 'path'), AGENT_PIPELINE_HOME: home }, provision: false })).resolves.toBe(onPath);
  });

  test('a cached binary is reused without building', async () => {
    const cached = await fakeTemporal(path.join(home, 'bin', 'temporal'), 'cache');
    const calls = path.join(scratch, 'go-calls');
    const goDir = path.join(scratch, 'go-bin');
    await fakeGo(goDir, calls);

    await expect(findTemporalCli({ env: { PATH: goDir, AGENT_PIPELINE_HOME: home }, log: () => {} })).resolves.toBe(cached);
    await expect(readFile(calls, 'utf8')).rejects.toMatchObject({ code: 'ENOENT' });
  });

  test('builds with go into the cache once, even when two callers ask at the same time', async () => {
    const calls = path.join(scratch, 'go-calls');
    const goDir = path.join(scratch, 'go-bin');
    await fakeGo(goDir, calls);
    const logs: string[] = [];
    const options = { env: { PATH: goDir, AGENT_PIPELINE_HOME: home }, log: (line: string) => logs.push(line), downloadUrl: null };

    const found = await Promise.all([findTemporalCli(options), findTemporalCli(options)]);

    const cached = path.join(home, 'bin', 'temporal');
    expect(found).toEqual([cached, cached]);
    const invocations = (await readFile(calls, 'utf8')).trim().split('\n').map((line) => JSON.parse(line) as string[]);
    expect(invocations).toHaveLength(1);
    expect(invocations[0]).toContain('github.com/temporalio/cli/cmd/temporal@v1.5.1');
    expect(logs).toContain('Building the Temporal CLI from its Go module (first run only, takes a few minutes)...');
    expect(logs).toContain('  go: downloading github.com/temporalio/cli v1.5.1');
    // A second call finds the cache and builds nothing.
    await expect(findTemporalCli(options)).resolves.toBe(cached);
    expect((await readFile(calls, 'utf8')).trim().split('\n')).toHaveLength(1);
  });

  test('with nothing installed and no go on PATH, the error lists what was tried and how to fix it', async () => {
    const attempt = findTemporalCli({ env: { PATH: emptyDir, AGENT_PIPELINE_HOME: home }, downloadUrl: UNREACHABLE_URL, log: () => {} });
    await expect(attempt).rejects.toBeInstanceOf(TemporalCliNotFoundError);
    const message = await attempt.catch((error: Error) => error.message);
    expect(message).toMatch(/^\[TEMPORAL_CLI_NOT_FOUND\] /);
    expect(message).toContain('TEMPORAL_CLI: not set');
    expect(message).toContain(`PATH: no executable \`temporal\` in ${emptyDir}`);
    expect(message).toContain(`cache: ${path.join(home, 'bin', 'temporal')} does not exist`);
    expect(message).toContain('go install github.com/temporalio/cli/cmd/temporal@v1.5.1: `go` not found on PATH');
    expect(message).toContain(`download ${UNREACHABLE_URL}: `);
    expect(message).toContain('put `temporal` on PATH or set TEMPORAL_CLI');
  });
});

describe('where local state lives (issue 34)', () => {
  test('the dev server\'s state is in the current folder\'s .agent-pipeline, or AGENT_PIPELINE_HOME, never in the package', () => {
    expect(resolveStateDir({}, '/home/me/project')).toBe('/home/me/project/.agent-pipeline');
    expect(resolveStateDir({ AGENT_PIPELINE_HOME: '/srv/ap' }, '/home/me/project')).toBe('/srv/ap');
  });

  test('an installed package caches the Temporal CLI in the user cache, a clone in its own folder', () => {
    const installed = '/home/me/project/node_modules/agent-pipeline/';
    expect(resolveCliCacheDir({ HOME: '/home/me' }, installed)).toBe('/home/me/.cache/agent-pipeline/bin');
    expect(resolveCliCacheDir({ HOME: '/home/me', XDG_CACHE_HOME: '/tmp/cache' }, installed)).toBe('/tmp/cache/agent-pipeline/bin');
    expect(resolveCliCacheDir({ AGENT_PIPELINE_HOME: '/srv/ap' }, installed)).toBe('/srv/ap/bin');
    expect(resolveCliCacheDir({}, '/home/me/agent-pipeline/')).toBe('/home/me/agent-pipeline/.agent-pipeline/bin');
  });
});
