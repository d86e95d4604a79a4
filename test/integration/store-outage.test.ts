import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { readLatestCheckpoints } from '../../src/activities/checkpoint/latest.js';
import { readCheckpointManifest } from '../../src/activities/checkpoint/manifest.js';
import { openStore } from '../../src/store/open-store.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { startVersitygw, versitygwOrSkip, type Versitygw } from '../helpers/versitygw.js';
import { waitFor } from './claude-cli-world.js';
import { stageOf } from './workflow-helpers.js';

/*
 * A run against an `s3://` store (versitygw) that goes down while a stage runs, for a real worker with
 * AGENT_PIPELINE_STORE_WAIT=4s. A short outage is waited out: the stage completes on its first attempt. A longer one at
 * the stage's end fails the attempt STORE_UNAVAILABLE instead of letting the run go on from files no store holds; the
 * next attempt writes the checkpoint and returns the result, without running the stage again.
 *
 * The stage is a command that records each run of it, says it started, and ends only once the test lets it (a `go` file
 * in the workspace), so the outage is sure to cover its end checkpoint.
 */

const binary = await versitygwOrSkip('the store outage tests');
const BUCKET = 'outage';
const COMMAND = 'echo ran >> runs.txt; touch started; while [ ! -f go ]; do sleep 0.1; done; echo done';
const yaml = (name: string) =>
  `name: ${name}\ndefaults: { heartbeatTimeout: 1m }\nstages:\n  - id: build\n    run: ${JSON.stringify(COMMAND)}\n    retries: 6\n    retry: { initialInterval: 1s, maximumInterval: 2s }\n`;

describe.skipIf(!binary)('a store outage while a stage runs', () => {
  let server: Versitygw;
  let harness: Harness;

  beforeAll(async () => {
    server = await startVersitygw(binary!);
    await server.createBucket(BUCKET);
    harness = await createHarness('store-outage', { scenario: { rules: [] }, env: { ...server.storeEnv(BUCKET), AGENT_PIPELINE_STORE_WAIT: '4s' } });
  }, 120_000);
  afterAll(async () => {
    await harness?.close();
    await server?.stop();
  });

  /** Starts the run, waits for its command to start, takes the store down, then lets the command end. */
  async function outageAtTheEnd(name: string): Promise<{ handle: Awaited<ReturnType<Harness['startYaml']>>; runId: string; serveAgain: () => Promise<void> }> {
    const handle = await harness.startYaml(name, yaml(name));
    const runId = handle.workflowId;
    await waitFor(() => existsSync(path.join(harness.runDir(runId), 'started')), Boolean, 'the command to start');
    const serveAgain = await server.outage();
    await writeFile(path.join(harness.runDir(runId), 'go'), '');
    return { handle, runId, serveAgain };
  }

  test('a store down for 2 s at the stage\'s end is waited out: no attempt is spent on it', { timeout: 120_000 }, async () => {
    const { handle, runId, serveAgain } = await outageAtTheEnd('short-outage');
    const downAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await serveAgain();
    const state = await harness.finish(handle);
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    const result = stageOf(state, 'build').result!;
    expect(result.warnings ?? []).toEqual([]);
    // Every activity of the run started once: no retry was spent on the outage.
    const started = ((await handle.fetchHistory()).events ?? []).flatMap((e) => (e.activityTaskStartedEventAttributes ? [e.activityTaskStartedEventAttributes.attempt] : []));
    expect(started.length).toBeGreaterThan(0);
    expect(started.every((attempt) => attempt === 1)).toBe(true);
    expect(await readFile(path.join(harness.runDir(runId), 'runs.txt'), 'utf8')).toBe('ran\n');
    // The end checkpoint was written, once the store was back: another host would restore the stage's files.
    const store = openStore(server.storeEnv(BUCKET), { defaultDir: harness.workspacesRoot });
    const latest = await readCheckpointManifest(store, harness.runRef(runId), (await readLatestCheckpoints(store, harness.runRef(runId)))!.id);
    expect(latest?.reason).toBe('end');
    expect(Date.parse(latest!.takenAt)).toBeGreaterThan(downAt);
  });

  test('an end checkpoint no store took fails the attempt STORE_UNAVAILABLE; the next one writes it and returns the result without running the stage again', { timeout: 180_000 }, async () => {
    const { handle, runId, serveAgain } = await outageAtTheEnd('long-outage');
    // Down until the first attempt has given up on its checkpoint (its 4 s wait) and a second one was scheduled.
    await waitFor(async () => (await handle.describe()).raw.pendingActivities?.[0]?.attempt ?? 1, (attempt) => attempt >= 2, 'a second attempt');
    const failure = (await handle.describe()).raw.pendingActivities?.[0]?.lastFailure?.message ?? '';
    await serveAgain();
    const state = await harness.finish(handle);
    expect(failure).toMatch(/\[STORE_UNAVAILABLE\] stage build: the attempt finished \(completed\), but the end checkpoint of the run failed: .*after waiting 4\.0s for the store/);
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    const result = stageOf(state, 'build').result!;
    expect(result.status).toBe('completed');
    expect(result.summary).toBe('done');
    // The command ran once: the second attempt only wrote the checkpoint.
    expect(await readFile(path.join(harness.runDir(runId), 'runs.txt'), 'utf8')).toBe('ran\n');
    expect(existsSync(path.join(harness.runBookkeeping(runId), 'stages'))).toBe(true);
  });
});
