import { randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { approveStageUpdate } from '../../src/contracts/messages.js';
import { waitFor } from './claude-cli-world.js';
import { hostsWorld } from './fault-helpers.js';
import { loseHost, restorableManifest } from './machine-loss-helpers.js';
import { expectNoStageLeftRunning, stageOf, waitForWaiting } from './workflow-helpers.js';

/*
 * A machine is lost while its run waits at a gate, and the run moves to a host where two worker processes share one
 * workspaces folder (the compose deployment: several workers on one volume, so one owner id and one pair of owner
 * queues). Worker A builds a large run folder (a command stage: 3,000 files, 120 MB), the run's checkpoint holds it,
 * and A is SIGKILLed with the run's folder and bookkeeping deleted. Workers B and C share only Temporal, the store and
 * the workspaces folder, with one stage slot each: once the gate is approved, stages a and b move to them at the same
 * moment, one each, and both need the run restored. Each has no retry (`retries: 0`). Before the restore lock held
 * across processes, both restored: the second met the folders the first had just moved into place (ENOTEMPTY) and
 * failed WORKSPACE_ERROR, and with it the run. Now the second waits for the first's restore, heartbeating (the wait
 * took 6 s beside the 5 s heartbeat timeout on a loaded 2-core machine), and finds the run in place: one restore, no
 * attempt spent, every file there.
 */

const FILES = 3_000;
const PIPELINE = [
  'name: pair',
  'defaults: { retries: 0, heartbeatTimeout: 5s }',
  'stages:',
  '  - id: big',
  `    run: "mkdir data && head -c ${FILES * 40_000} /dev/urandom | split -b 40000 -a 4 - data/part-"`,
  '  - { id: gate, needs: [big], approval: true }',
  '  - { id: a, needs: [gate], run: "echo a > a.txt" }',
  '  - { id: b, needs: [gate], run: "echo b > b.txt" }',
  '',
].join('\n');

/** The workers polling `taskQueue` for activities, by identity. */
async function activityPollers(client: Awaited<ReturnType<typeof hostsWorld>>['harness']['client'], taskQueue: string): Promise<string[]> {
  const response = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: 2, // TASK_QUEUE_TYPE_ACTIVITY
  });
  return [...new Set((response.pollers ?? []).map((p) => p.identity ?? ''))];
}

/** The stages whose attempts a worker's log says it ran. */
const stagesRun = (output: string): string[] => [...new Set([...output.matchAll(/"message":"stage attempt ended"[^\n]*?"stage":"(\w+)"/g)].map((m) => m[1]!))].sort();

describe('a machine lost, its run moving to two worker processes that share one workspaces folder', () => {
  test('the second waits for the first one’s restore, then finds the run in place: one restore, no attempt spent', { timeout: 400_000 }, async ({ onTestFinished }) => {
    const { harness, worker } = await hostsWorld('checkpoint-loss-shared', { scenario: { rules: [] }, env: { AGENT_PIPELINE_CHECKPOINTS: 'on' } }, onTestFinished);
    const file = await harness.writePipeline('pair', PIPELINE);
    const first = worker();
    const handle = await harness.start(file);
    const runId = handle.workflowId;
    await waitForWaiting(handle, 'gate', 'approval', 240_000);
    // The gate waits once big's end checkpoint is written: that is the one the run goes on from.
    const manifest = await restorableManifest(harness, runId);
    expect(manifest?.reason).toBe('end');
    await loseHost(harness, first, runId);

    // One host, two worker processes: one owner id, so both poll the run's owner queue once it moves there.
    const ownerId = `shared-${randomUUID()}`;
    const host = { AGENT_PIPELINE_OWNER_ID: ownerId, AGENT_PIPELINE_MAX_CONCURRENT_STAGES: '1' };
    const [second, third] = [worker(host), worker(host)];
    const ownerQueue = `${harness.taskQueue}@owner-${ownerId}`;
    await waitFor(() => activityPollers(harness.client, ownerQueue), (pollers) => pollers.length >= 2, 'both workers polling the shared owner queue', 120_000);
    await handle.executeUpdate(approveStageUpdate, { args: [{ stage: 'gate' }] });

    const state = await harness.finish(handle);
    const logs = `worker B:\n${second.output().slice(-4_000)}\nworker C:\n${third.output().slice(-4_000)}`;
    const explain = `${JSON.stringify(state.error)}\n${JSON.stringify(state.stages.map((s) => ({ id: s.id, status: s.status, error: s.error, attempts: s.totals?.attempts })))}\n${logs}`;
    expectNoStageLeftRunning(state);
    // Each process took one of the two stages: the restores met across processes, not inside one.
    expect([stagesRun(second.output()), stagesRun(third.output())].sort(), explain).toEqual([['a'], ['b']]);
    expect(state.status, explain).toBe('completed');
    // One restored; the other waited for it (its log says so), then found the run in place.
    const both = `${second.output()}${third.output()}`;
    expect(both.match(/restored the run from its checkpoint/g), explain).toHaveLength(1);
    expect(both, explain).toContain('waiting for another attempt that is restoring the run');
    for (const stage of ['a', 'b']) {
      expect(stageOf(state, stage).totals?.attempts, `${stage}: ${explain}`).toBe(1);
      expect(await readFile(path.join(state.workspace!, `${stage}.txt`), 'utf8')).toBe(`${stage}\n`);
    }
    expect(await readdir(path.join(state.workspace!, 'data'))).toHaveLength(FILES);
  });
});
