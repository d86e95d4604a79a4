import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { waitFor } from './claude-cli-world.js';
import { hostsWorld } from './fault-helpers.js';
import { loseHost, restorableManifest } from './machine-loss-helpers.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

/*
 * A run moves after its host is lost, and the first worker left has another AGENT_PIPELINE_WORKSPACES than the one the
 * run's checkpoint was taken under: Claude Code could not find the run's sessions there. That worker declines to own
 * the run (the claim goes round) instead of taking it and failing it for good; a worker with the run's path, started
 * later, takes it, restores the checkpoint and finishes the run. Command stages (no model): real worker processes, the
 * real sandbox, a folder store shared by the workers.
 */

describe('a moved run and a worker with another workspaces path', () => {
  test('that worker declines the run; one with the run\'s path takes it and finishes it', { timeout: 240_000 }, async ({ onTestFinished }) => {
    const { harness, worker } = await hostsWorld('owner-other-path', { scenario: { rules: [] } }, onTestFinished);
    const elsewhere = await mkdtemp(path.join(os.tmpdir(), 'owner-other-path-'));
    onTestFinished(() => rm(elsewhere, { recursive: true, force: true }));
    const go = path.join(elsewhere, 'go');
    const file = await harness.writePipeline('moved', [
      'name: moved',
      'defaults: { heartbeatTimeout: 3s, retries: 3, retry: { initialInterval: 1s }, checkpoint: { every: 1s } }',
      'stages:',
      '  - { id: build, run: "echo built > built.txt" }',
      '  - id: wait',
      '    needs: [build]',
      '    run: \'echo ran >> runs.txt; while [ ! -f "$GO" ]; do sleep 0.1; done; echo waited\'',
      `    env: { GO: ${JSON.stringify(go)} }`,
      '',
    ].join('\n'));
    const first = worker({ AGENT_PIPELINE_CHECKPOINTS: 'on' });
    const handle = await harness.start(file);
    const runId = handle.workflowId;
    await waitFor(() => readFile(path.join(harness.runDir(runId), 'runs.txt'), 'utf8').catch(() => ''), (text) => text.includes('ran'), 'the wait stage to start', 90_000);
    await waitFor(() => restorableManifest(harness, runId), (m) => m !== undefined, 'a checkpoint to restore from', 30_000);
    await loseHost(harness, first, runId);
    await writeFile(go, '');

    // Only a worker under another workspaces folder (the same store) is left: it must not take the run.
    const otherRoot = path.join(elsewhere, 'workspaces');
    const store = `file://${path.join(harness.workspacesRoot, '.agent-pipeline', 'store')}`;
    const other = worker({ AGENT_PIPELINE_CHECKPOINTS: 'on', AGENT_PIPELINE_WORKSPACES: otherRoot, AGENT_PIPELINE_STORE: store });
    const claim = async () => (await handle.describe()).raw.pendingActivities?.find((a) => a.activityType?.name === 'claimRunOwner');
    const declined = await waitFor(claim, (a) => (a?.attempt ?? 0) >= 2, 'the other worker to decline the run', 120_000);
    expect(declined?.lastFailure?.message).toMatch(/would put the run outside .*, where its checkpoint was taken \(another AGENT_PIPELINE_WORKSPACES\)/);

    worker({ AGENT_PIPELINE_CHECKPOINTS: 'on' });
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    expect(stageOf(state, 'wait').result?.summary).toBe('waited');
    expect(await readFile(path.join(harness.runDir(runId), 'built.txt'), 'utf8')).toBe('built\n');
    expect(other.output()).not.toContain('CONFIG_INVALID');
  });
});
