import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/*
 * An embedded worker can be quieted in a user's tests (issue 21): `createPipelineWorker({ logLevel: 'silent' })`.
 * Temporal's logging is one per process, so each case runs in a process of its own, as a user's test file would.
 */

const SCRIPT = `
import { createPipelineWorker } from ${JSON.stringify(pathToFileURL(path.join(PROJECT_ROOT, 'dist/library/worker.js')).href)};
const [address, logLevel, workspacesRoot] = process.argv.slice(2);
const options = { address, taskQueue: 'logs-' + Math.random().toString(36).slice(2), workspacesRoot, logLevel };
const worker = await createPipelineWorker(options);
const running = worker.run();
while (worker.getState() !== 'RUNNING') await new Promise((r) => setTimeout(r, 50));
// A second worker of the same process asking the same is fine; asking another level is refused.
const again = await createPipelineWorker(options);
const refused = await createPipelineWorker({ ...options, logLevel: logLevel === 'silent' ? 'INFO' : 'silent' }).then(() => 'created', (e) => e.code);
const againRunning = again.run();
while (again.getState() !== 'RUNNING') await new Promise((r) => setTimeout(r, 50));
for (const w of [again, worker]) w.shutdown();
await Promise.all([againRunning, running]);
for (const w of [again, worker]) await w.connection?.close();
console.log(JSON.stringify({ refused }));
`;

describe('an embedded worker’s logs', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'worker-logs-'));
    await writeFile(path.join(dir, 'worker.mjs'), SCRIPT);
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  const run = (level: string) =>
    execa('node', [path.join(dir, 'worker.mjs'), inject('temporalAddress'), level, path.join(dir, 'workspaces')], {
      reject: false,
      env: { ...process.env, AGENT_PIPELINE_LOG_FORMAT: 'json' },
      timeout: 120_000,
    });

  test('say nothing with logLevel silent, and what Temporal says at INFO', async () => {
    const [silent, info] = await Promise.all([run('silent'), run('INFO')]);
    expect(silent.exitCode, silent.stderr).toBe(0);
    expect(info.exitCode, info.stderr).toBe(0);
    expect(info.stderr).toContain('Worker state changed');
    expect(silent.stderr).toBe('');
    expect(JSON.parse(silent.stdout)).toEqual({ refused: 'CONFIG_INVALID' });
    expect(JSON.parse(info.stdout)).toEqual({ refused: 'CONFIG_INVALID' });
  }, 180_000);
});
