import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { readLatestCheckpoints } from '../../src/activities/checkpoint/latest.js';
import { readCheckpointManifest } from '../../src/activities/checkpoint/manifest.js';
import { openStore } from '../../src/store/open-store.js';
import { startVersitygw, versitygwOrSkip } from '../helpers/versitygw.js';
import { waitFor } from './claude-cli-world.js';
import { hostsWorld, waitForRequest } from './fault-helpers.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

/*
 * A machine is lost while two stages of one run work at once: worker A (the real claude CLI, the scripted model, an
 * `s3://` store on versitygw) is SIGKILLed in the middle of both stages' second turn, and its whole workspaces folder
 * deleted. Worker B shares only Temporal and the store: both stages move to it at once and it restores the run once
 * for both. Each stage has one retry, the one the lost attempt takes: restoring twice, the second stage found the
 * folders the first had just restored in its way (ENOTEMPTY), spent a retry it did not have, and failed the run.
 */

const binary = await versitygwOrSkip('the parallel machine-loss test');

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const rule = (stage: string): Rule => ({
  name: stage,
  match: `Pipeline: pair · Stage: ${stage} ·`,
  turns: [
    { text: 'Step one.', tool: { name: 'Bash', input: { command: `echo one > ${stage}.txt`, description: 'Write step one' } } },
    // Streams for about twenty seconds: the worker is killed in the middle of it, after a checkpoint holds step one.
    { text: 'Step two, slowly. '.repeat(80), chunks: 80, chunkDelayMs: 250, tool: { name: 'Bash', input: { command: `echo two >> ${stage}.txt`, description: 'Write step two' } } },
    // The resumed session (restored from the checkpoint, with a note of the restore) ends here. Without a command: two
    // agents' sandboxes in one folder race for the placeholders they bind (a Claude Code matter, not the restore's).
    { text: report(`Wrote ${stage}.`) },
  ],
});

const PIPELINE = [
  'name: pair',
  'defaults: { backend: claude-cli, model: sonnet, retries: 1, heartbeatTimeout: 5s, permissionMode: dontAsk, allowedTools: [Bash, Read], checkpoint: { every: 1s } }',
  'stages:',
  '  - { id: a, prompt: Write a. }',
  '  - { id: b, prompt: Write b. }',
  '',
].join('\n');

describe.skipIf(!binary)('a machine lost during two stages of a run', () => {
  test('both stages go on on another worker, which restores the run once for them', { timeout: 300_000 }, async ({ onTestFinished }) => {
    const server = await startVersitygw(binary!);
    onTestFinished(() => server.stop());
    await server.createBucket('pair');
    const store = server.storeEnv('pair');
    const { harness, worker } = await hostsWorld('checkpoint-loss-pair', { scenario: { rules: [rule('a'), rule('b')] }, env: store }, onTestFinished);
    const file = await harness.writePipeline('pair', PIPELINE);
    const first = worker(store);
    const handle = await harness.start(file);
    await waitForRequest(harness.modelServer, (r) => r.rule === 'a' && r.turn === 1, 90_000);
    await waitForRequest(harness.modelServer, (r) => r.rule === 'b' && r.turn === 1, 90_000);
    // Turn 1 is asked for once step one's command has run: a periodic checkpoint after both holds a.txt and b.txt.
    const afterStepOne = Date.now();
    const checkpoints = openStore(store, { defaultDir: harness.workspacesRoot });
    const latest = async () => {
      const index = await readLatestCheckpoints(checkpoints, handle.workflowId);
      return index && (await readCheckpointManifest(checkpoints, handle.workflowId, index.id));
    };
    await waitFor(latest, (m) => m?.reason === 'periodic' && Date.parse(m.takenAt) > afterStepOne, 'a periodic checkpoint after both first steps', 60_000);
    await first.crash();
    for (const entry of await readdir(harness.workspacesRoot)) await rm(path.join(harness.workspacesRoot, entry), { recursive: true, force: true });
    worker(store);

    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    for (const stage of ['a', 'b']) {
      expect(stageOf(state, stage).totals?.attempts).toBe(2);
      expect(await readFile(path.join(state.workspace!, `${stage}.txt`), 'utf8')).toBe('one\n');
    }
    // Both agents went on in their own sessions, told of the restore; step one ran once.
    for (const stage of ['a', 'b']) {
      expect(harness.modelServer.requests().filter((r) => r.rule === stage && r.turn === 0)).toHaveLength(1);
      const resumed = harness.modelServer.requests().filter((r) => r.rule === stage && r.turn === 2);
      expect(resumed).toHaveLength(1);
      expect(JSON.stringify(resumed[0]!.body)).toContain(`echo one > ${stage}.txt`);
      expect(JSON.stringify(resumed[0]!.body)).toMatch(/restored from a checkpoint taken at/);
    }
  });
});
