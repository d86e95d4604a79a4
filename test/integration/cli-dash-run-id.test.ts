import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PIPELINE_NAME_ATTRIBUTE } from '../../src/contracts/search-attributes.js';
import { PIPELINE_WORKFLOW_TYPE } from '../../src/contracts/messages.js';
import { loadPipelineFile } from '../../src/library/load-pipeline.js';
import { startRun } from '../../src/library/runs.js';
import { RUN_INPUT_VERSION } from '../../src/pipeline/run-input.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { pastedArguments, runCli } from './cli-helpers.js';
import { waitForWaiting } from './workflow-helpers.js';

/*
 * A run id starting with "-" is read as an option wherever it is pasted (`agent-pipeline status -x`). Clients refuse
 * such ids now, but runs started under one before (or past our clients: the workflow still takes them) must stay
 * reachable: the command line says to put the id after `--`, and every command printed for the run does so.
 */

const GATE = 'name: dash\nstages:\n  - id: gate\n    approval: true\n';

describe('a run whose id starts with "-"', () => {
  let harness: Harness;
  let scratch: string;
  beforeAll(async () => {
    harness = await createHarness('dash-run-id', { scenario: { rules: [] } });
    scratch = await mkdtemp(path.join(tmpdir(), 'dash-run-id-'));
  });
  afterAll(async () => {
    await harness?.close();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  test('is refused at start by the library, naming the id and the fix', async () => {
    const file = await harness.writePipeline('dash-refused', GATE);
    const { pipeline, baseDir } = await loadPipelineFile(file);
    const refused = await startRun(harness.client, { pipeline, baseDir, pipelineFile: file, inputs: {} }, { taskQueue: harness.taskQueue, id: '-refused' }).catch((err: unknown) => err);
    expect((refused as { code?: string }).code).toBe('INPUT_INVALID');
    expect((refused as Error).message).toBe(
      '[INPUT_INVALID] run id "-refused" starts with "-", which a command line reads as an option (`agent-pipeline status -refused` would fail); choose an id that starts with a letter or digit',
    );
  });

  test('started before such ids were refused, is reached after `--`, and every command printed for it pastes as shown', { timeout: 120_000 }, async () => {
    const id = `-dash-${Math.random().toString(36).slice(2, 8)}`;
    // As a client of an earlier release started it: the workflow itself takes the id.
    const file = await harness.writePipeline('dash', GATE);
    const { pipeline, baseDir } = await loadPipelineFile(file);
    const handle = await harness.client.workflow.start(PIPELINE_WORKFLOW_TYPE, {
      workflowId: id,
      taskQueue: harness.taskQueue,
      args: [{ version: RUN_INPUT_VERSION, pipeline, baseDir, pipelineFile: file, inputs: {} }],
      typedSearchAttributes: [{ key: PIPELINE_NAME_ATTRIBUTE, value: pipeline.name }],
    });
    await waitForWaiting(handle, 'gate', 'approval');

    // Pasted as it was, the id is an unknown option: the error says where the id goes.
    const bare = await runCli(['status', id], harness.env);
    expect(bare.exitCode, bare.all).toBe(2);
    expect(bare.stderr).toContain(`error: unknown option '${id}'\n(if ${id} is an id, put it after --, which ends the options: agent-pipeline status [options] -- ${id})`);

    const status = await runCli(['status', '--', id], harness.env);
    expect(status.exitCode, status.all).toBe(0);
    const offered = status.stdout.split('\n').filter((line) => line.includes('→ agent-pipeline '));
    const pasted = await Promise.all(offered.map((line) => pastedArguments(line, scratch)));
    expect(pasted).toEqual([
      ['approve', '--stage', 'gate', '--', id],
      ['reject', '--stage', 'gate', '--reason', '...', '--', id],
    ]);
    expect(await readdir(scratch)).toEqual([]);

    // The approval as printed, pasted, ends the run.
    const approved = await runCli(pasted[0], harness.env);
    expect(approved.exitCode, approved.all).toBe(0);
    expect((await harness.finish(handle)).status).toBe('completed');
  });
});
