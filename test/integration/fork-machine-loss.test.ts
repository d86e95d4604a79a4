import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import type { RunState } from '../../src/pipeline/run-state.js';
import { startVersitygw, versitygwOrSkip } from '../helpers/versitygw.js';
import { parseJson, runCli } from './cli-helpers.js';
import { hostsWorld } from './fault-helpers.js';
import { reviewLoopPipeline, RULES, runToEnd } from './fork-helpers.js';

/*
 * A fork of a run whose host is gone: worker A runs the source against an `s3://` store (versitygw) and its host is
 * lost (killed, its whole workspaces folder deleted); worker B, sharing only Temporal and the store, runs the fork. A
 * review in the fork sends the taken-over stage back for rework, which resumes that stage's own session: B holds none
 * of the source's files, so the session comes from the source's checkpoint in the store.
 */

const binary = await versitygwOrSkip('the fork of a lost host\'s run');


describe.skipIf(!binary)('a fork of a run whose host is gone', () => {
  test('a rework of a taken-over stage resumes its session from the source\'s checkpoint in the store', { timeout: 300_000 }, async ({ onTestFinished }) => {
    const server = await startVersitygw(binary!);
    onTestFinished(() => server.stop());
    await server.createBucket('forks');
    const store = server.storeEnv('forks');
    const { harness, worker } = await hostsWorld('fork-loss', { scenario: { rules: RULES }, env: store }, onTestFinished);
    const file = await harness.writePipeline('loop', reviewLoopPipeline('Review the code.'));
    const first = worker(store);
    expect((await runToEnd(harness, file, 'lost-source')).status).toBe('completed');
    // The source's host is gone: its worker, and everything under its workspaces folder.
    await first.crash();
    for (const entry of await readdir(harness.workspacesRoot)) await rm(path.join(harness.workspacesRoot, entry), { recursive: true, force: true });
    worker(store);

    await harness.writePipeline('loop', reviewLoopPipeline('Review strictly.'));
    const forked = await runCli(['fork', 'lost-source', '--from', 'review', '--id', 'lost-fork', '--wait', '--json'], harness.env, 240_000);
    expect(forked.exitCode, forked.all).toBe(0);
    const state = parseJson<RunState>(forked);
    expect(state.stages.find((s) => s.id === 'impl')).toMatchObject({ status: 'completed', round: 2 });
    expect(JSON.stringify(state)).not.toContain('starts a new session');
    // impl's rework went on in the conversation it had in the source run, on the lost host.
    const rework = harness.modelServer.requests().filter((r) => r.rule === 'impl').at(-1);
    const conversation = JSON.stringify(rework?.body);
    expect(conversation).toContain('Write the code.');
    expect(conversation).toContain('impl done');
    expect(conversation).toContain('F1: name the function');
  });
});
