import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { setTimeout } from 'node:timers/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { checkpointKey } from '../../src/activities/checkpoint/keys.js';
import { CHECKPOINT_OBJECTS } from '../../src/activities/checkpoint/manifest.js';
import { extractArchive } from '../../src/activities/checkpoint/folder-archive.js';
import { findStageStartCheckpoint } from '../../src/activities/checkpoint/stage-start.js';
import { FileStore } from '../../src/store/file-store.js';
import type { RunRef } from '../../src/pipeline/run-state.js';
import { withLock } from '../../src/activities/workspace/keyed-lock.js';
import { stageOf } from './workflow-helpers.js';
import { createHarness, type Harness } from '../helpers/harness.js';

/*
 * The checkpoint a fork starts from (docs/forking.md): the one taken when a stage first started. A three-stage run
 * (real worker, the real claude CLI in its sandbox, the scripted model) writes one file per stage; after it, the store
 * still holds each stage's first-start checkpoint (the run's other checkpoints were replaced as it went), naming its
 * stage, and each holds exactly the files of the stages before it.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const writes = (stage: string): Rule => ({
  name: stage,
  match: `Pipeline: starts · Stage: ${stage} ·`,
  turns: [{ text: 'Writing.', tool: { name: 'Bash', input: { command: `echo ${stage} > ${stage}.txt`, description: `Write ${stage}.txt` } } }, { text: report(`Wrote ${stage}.txt.`) }],
});

const PIPELINE = [
  'name: starts',
  'defaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 10s, permissionMode: dontAsk, allowedTools: [Bash] }',
  'stages:',
  '  - { id: one, prompt: Write one.txt. }',
  '  - { id: two, needs: [one], prompt: Write two.txt. }',
  '  - { id: three, needs: [two], prompt: Write three.txt. }',
  '',
].join('\n');

describe("a stage's first-start checkpoint", () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('stage-start', { scenario: { rules: ['one', 'two', 'three'].map(writes) }, env: { AGENT_PIPELINE_CHECKPOINTS: 'on' } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  test('is kept for every stage after the run ends, names its stage, and holds only what the stages before it wrote', async () => {
    const handle = await harness.start(await harness.writePipeline('starts', PIPELINE));
    const state = await harness.finish(handle);
    expect(state.status, JSON.stringify(state.stages).slice(0, 2_000)).toBe('completed');
    const runId = handle.workflowId;
    const run = harness.runRef(runId);
    const store = new FileStore(path.join(harness.workspacesRoot, '.agent-pipeline', 'store'));
    const expected: Record<string, string[]> = { one: [], two: ['one.txt'], three: ['one.txt', 'two.txt'] };
    for (const [stage, files] of Object.entries(expected)) {
      const manifest = await findStageStartCheckpoint(store, run, stage);
      expect(manifest, `the first-start checkpoint of ${stage}`).toMatchObject({ runId, reason: 'start', stage, kind: 'folder' });
      expect(await filesOf(store, run, manifest!.id)).toEqual(files);
    }
    expect(await findStageStartCheckpoint(store, run, 'four')).toBeUndefined();
  });

  test('heartbeats while it waits: a stage whose checkpoint waits behind another does not time out', async () => {
    // The worker takes one checkpoint of a run at a time: the test holds the run's turn (as a parallel stage's
    // checkpoint of a large workspace would) for longer than the stage's heartbeat timeout. The stage is a command:
    // nothing else heartbeats before it starts.
    const id = `stage-start-waits-${Date.now()}`;
    const yaml = ['name: waits', 'defaults: { heartbeatTimeout: 10s, retries: 0 }', 'stages:', '  - { id: only, run: "echo done" }', ''].join('\n');
    let started!: () => void;
    const taking = new Promise<void>((resolve) => (started = resolve));
    const held = withLock(`checkpoint:${id}`, async () => {
      started();
      await setTimeout(16_000);
    });
    await taking;
    const state = await harness.finish(await harness.start(await harness.writePipeline('waits', yaml), {}, id));
    await held;
    expect(state.status, JSON.stringify(state.stages).slice(0, 2_000)).toBe('completed');
    expect(stageOf(state, 'only').result?.attempt).toBe(1);
  });
});

/** The files (not the bookkeeping) of a folder checkpoint's archive, sorted. */
async function filesOf(store: FileStore, run: RunRef, id: string): Promise<string[]> {
  const scratch = await mkdtemp(path.join(tmpdir(), 'stage-start-'));
  try {
    const archive = path.join(scratch, 'workspace.tar');
    expect(await store.getFile(checkpointKey(run, id, CHECKPOINT_OBJECTS.folderArchive), archive, 100 * 1024 * 1024)).toBe(true);
    const into = path.join(scratch, 'files');
    await mkdir(into);
    await extractArchive(archive, into);
    return (await readdir(into)).filter((f) => f.endsWith('.txt')).sort();
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
