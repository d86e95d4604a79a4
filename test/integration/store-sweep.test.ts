import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { listCheckpoints } from '../../src/activities/checkpoint/keys.js';
import { FileStore } from '../../src/store/file-store.js';
import { runKeyPrefix } from '../../src/store/run-keys.js';
import { ageFiles } from '../helpers/age-files.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { waitFor } from './claude-cli-world.js';

/*
 * Stored objects live as long as Temporal keeps their run (docs/deployment.md, "How long stored objects live"): a
 * worker's sweep deletes the objects of a run once Temporal no longer has it (here: deleted, as the namespace's
 * retention does after a run ends), its claimed payloads with them, and keeps those of runs it still has, which can
 * still be read and forked. A gone run's objects are made old first, as the retention makes them: the sweep keeps
 * objects younger than its margin (a later run of the id may have just written them).
 */

const PIPELINE = 'name: swept\ndefaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }\nstages:\n  - { id: only, prompt: Do it. }\n';
// Over the claim-check threshold set below: each run's stage result, state and result are claimed under its keys.
const REPORT = `Done.\n\`\`\`json\n${JSON.stringify({ success: true, summary: 'done', outputs: { long: 'x'.repeat(4000) } })}\n\`\`\``;

describe('the store sweep', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('store-sweep', { scenario: { rules: [], fallback: { text: REPORT } }, env: { AGENT_PIPELINE_STORE_SWEEP: '2s', AGENT_PIPELINE_CLAIM_CHECK_BYTES: '2048' } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  const store = () => path.join(harness.workspacesRoot, '.agent-pipeline', 'store');
  const prefixOf = (runId: string) => path.join(store(), runKeyPrefix(runId));
  /** Makes the run's objects old, deletes the run as the namespace's retention does, and waits for the sweep. */
  const goneAndSwept = async (runId: string): Promise<void> => {
    await ageFiles(prefixOf(runId));
    await harness.client.workflowService.deleteWorkflowExecution({ namespace: 'default', workflowExecution: { workflowId: runId } });
    // The server deletes a run's history in the background: seconds on a quiet machine, longer on a loaded one.
    await waitFor(async () => existsSync(prefixOf(runId)), (present) => !present, `the objects of ${runId} to be deleted`, 100_000);
  };

  test('deletes the objects of a run Temporal no longer keeps, and keeps a live run\'s', { timeout: 180_000 }, async () => {
    const kept = await harness.startYaml('swept', PIPELINE, 'sweep-kept');
    const gone = await harness.startYaml('swept', PIPELINE, 'sweep-gone');
    for (const handle of [kept, gone]) expect((await harness.finish(handle)).status).toBe('completed');
    // Each run's fork point, claimed payloads and record are in the store.
    for (const id of ['sweep-kept', 'sweep-gone']) {
      expect(existsSync(path.join(prefixOf(id), 'run.json'))).toBe(true);
      expect((await readdir(path.join(prefixOf(id), 'claims'))).length).toBeGreaterThan(0);
    }

    const deletedAt = Date.now();
    await goneAndSwept('sweep-gone');
    // The dev server records a closed run's close as done every second (src/dev/dev-server.ts); at the server's default
    // of 30 s, a run deleted right after it ended stayed 30–35 s.
    expect(Date.now() - deletedAt).toBeLessThan(25_000);
    expect(existsSync(path.join(prefixOf('sweep-kept'), 'run.json'))).toBe(true);
    // The kept run can still be forked: its fork point is there (under its own execution's prefix, as a fork reads it).
    expect(await listCheckpoints(new FileStore(store()), harness.runRef('sweep-kept'))).not.toEqual([]);
    // …and read: its claimed state and result resolve.
    const state = await harness.finish(harness.client.workflow.getHandle('sweep-kept'));
    expect(state.stages[0]!.result?.outputs?.long).toHaveLength(4000);
  });

  test('records a run that reuses the id of a swept run, and sweeps it once it is gone in turn', { timeout: 240_000 }, async () => {
    for (const round of [1, 2]) {
      const handle = await harness.startYaml('swept', PIPELINE, 'sweep-reused');
      expect((await harness.finish(handle)).status).toBe('completed');
      // The second run's record too, written by the worker whose sweep deleted the first run's.
      expect(existsSync(path.join(prefixOf('sweep-reused'), 'run.json')), `round ${round}`).toBe(true);
      await goneAndSwept('sweep-reused');
    }
  });
});
