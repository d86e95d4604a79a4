import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { writeEndedMarker } from '../../src/activities/workspace/remove-workspace.js';
import { runCli } from './cli-helpers.js';

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
    await mkdir(path.join(root, 'old-run'));
    await writeEndedMarker(path.join(root, 'old-run'), { runId: 'old-run', status: 'completed', endedAt: Date.now() - TEN_DAYS_MS, pushed: true });
  });
  afterAll(async () => rm(root, { recursive: true, force: true }));

  test('deletes nothing and exits 3, naming --force', async () => {
    const pruned = await runCli(['prune'], env);
    expect(existsSync(path.join(root, 'old-run')), 'prune deleted a workspace without asking Temporal').toBe(true);
    expect(pruned.exitCode, pruned.all).toBe(3);
    expect(pruned.stderr).toContain('Use --force to trust the records');
  });

  test('with --force trusts the records and removes what ended long enough ago', async () => {
    const pruned = await runCli(['prune', '--force'], env);
    expect(pruned.exitCode, pruned.all).toBe(0);
    expect(pruned.stdout).toContain('removed  old-run (completed, ended');
    expect(existsSync(path.join(root, 'old-run'))).toBe(false);
  });
});
