import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { writeEndedMarker } from '../../src/activities/workspace/remove-workspace.js';
import { toFolderName } from '../../src/activities/workspace/run-folder.js';
import { runCli } from './cli-helpers.js';
import { FileStore } from '../../src/store/file-store.js';
import { runKeyPrefix } from '../../src/store/run-keys.js';

/*
 * Issue 19, reproduction 6: `prune` trusted the record a run leaves in its folder without asking Temporal, so it
 * deleted a workspace while Temporal was unreachable (the record may be stale: a reused run id, a reset run).
 * Through the real command, with no Temporal server listening.
 */

describe('prune with Temporal unreachable', () => {
  let root: string;
  let env: NodeJS.ProcessEnv;
  const TEN_DAYS_MS = 10 * 86_400_000;

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'prune-safety-'));
    env = { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: '127.0.0.1:1', AGENT_PIPELINE_WORKSPACES: root };
    const ended = { status: 'completed', endedAt: Date.now() - TEN_DAYS_MS, pushed: true };
    // A run as this release leaves it: its folder, and its records in the workers' own folder.
    await mkdir(dir('old-run'));
    await mkdir(bookkeeping('old-run'), { recursive: true });
    await writeEndedMarker(bookkeeping('old-run'), { runId: 'old-run', ...ended });
    // A run that ended before the records moved out of run folders: its only records are in its own tree.
    await mkdir(path.join(dir('older-run'), '.agent-pipeline'), { recursive: true });
    await writeEndedMarker(path.join(dir('older-run'), '.agent-pipeline'), { runId: 'older-run', ...ended });
    // Their objects in the default store (checkpoints; a claimed payload of old-run), and a claim of no known run.
    for (const runId of ['old-run', 'older-run']) await store().put(`${runKeyPrefix(runId)}checkpoint/manifest.json`, Buffer.from('{}'));
    await store().put(`${runKeyPrefix('old-run')}claims/${'b'.repeat(64)}`, Buffer.from('claimed'));
    await store().put(`claims/${'a'.repeat(64)}`, Buffer.from('shared'));
  });
  const store = () => new FileStore(path.join(root, '.agent-pipeline', 'store'));
  const keys = async (): Promise<string[]> => {
    const found: string[] = [];
    for await (const key of store().list('')) found.push(key);
    return found.sort();
  };
  const dir = (runId: string): string => path.join(root, toFolderName(runId));
  const bookkeeping = (runId: string): string => path.join(root, '.agent-pipeline', 'runs', toFolderName(runId));
  afterAll(async () => rm(root, { recursive: true, force: true }));

  test('deletes nothing and exits 3, naming --force', async () => {
    const pruned = await runCli(['prune'], env);
    expect(existsSync(dir('old-run')), 'prune deleted a workspace without asking Temporal').toBe(true);
    expect(await keys()).toHaveLength(4);
    expect(pruned.exitCode, pruned.all).toBe(3);
    expect(pruned.stderr).toContain('Use --force to trust the records');
  });

  test('with --force trusts the records in the workers\' own folder, never those in a run\'s tree, and removes what ended long enough ago', async () => {
    const pruned = await runCli(['prune', '--force'], env);
    expect(pruned.exitCode, pruned.all).toBe(0);
    expect(pruned.stdout).toContain('removed  old-run (completed, ended');
    expect(existsSync(dir('old-run'))).toBe(false);
    expect(existsSync(bookkeeping('old-run'))).toBe(false);
    // Its agent could have written those records: kept, and prune says how to remove it.
    expect(pruned.stdout).toContain('kept  older-run (completed, ended');
    expect(pruned.stderr).toContain('its only records are inside its own folder, where its agent could have written them');
    expect(existsSync(dir('older-run'))).toBe(true);
    // The store: the removed run's objects are gone, its claimed payload too; the kept run's and the shared claim stay.
    expect(await keys()).toEqual([`claims/${'a'.repeat(64)}`, `${runKeyPrefix('older-run')}checkpoint/manifest.json`].sort());
  });
});
