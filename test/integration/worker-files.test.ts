import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PIPELINE_WORKFLOW_TYPE } from '../../src/contracts/messages.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { stageOf } from './workflow-helpers.js';

/*
 * Issue 33, item 6: a run that carries no bundle names `baseDir`, a folder of the worker's host its files are read
 * from. Started straight through Temporal's client in the `--files-from-worker` shape, with `baseDir: /etc` and
 * `context: [passwd]`, on a worker without trusted keys, the password file reached the model. A worker now reads such
 * files only inside the folders AGENT_PIPELINE_PIPELINE_DIRS lists (real paths). Real worker, real Temporal, the
 * scripted model server recording every request.
 */

const PIPELINE = `
name: reads-context
context: [passwd]
stages:
  - { id: summary, backend: anthropic-api, model: haiku, contract: none, prompt: "Summarise the context you were given." }
`;

describe('runs that carry no files (--files-from-worker)', () => {
  let harness: Harness;
  let base: string;
  let listed: string;
  beforeAll(async () => {
    base = await mkdtemp(path.join(tmpdir(), 'worker-files-'));
    listed = path.join(base, 'pipelines');
    await mkdir(listed);
    harness = await createHarness('worker-files', {
      env: { AGENT_PIPELINE_PIPELINE_DIRS: listed },
      scenario: { rules: [{ name: 'summary', match: 'Summarise the context', turns: [{ text: 'A summary.' }] }] },
    });
  });
  afterAll(async () => {
    await harness?.close();
    await rm(base, { recursive: true, force: true });
  });

  /** A start as any Temporal client can send it: the run input without a bundle, `baseDir` of the sender's choosing. */
  const rawStart = (baseDir: string) =>
    harness.client.workflow.start(PIPELINE_WORKFLOW_TYPE, {
      taskQueue: harness.taskQueue,
      workflowId: `worker-files-${Math.random().toString(36).slice(2, 10)}`,
      args: [{ pipeline: parsePipeline(PIPELINE, 'pipeline.yaml'), baseDir, pipelineFile: path.join(baseDir, 'pipeline.yaml'), inputs: {} }],
    });

  const requestsHolding = (text: string) => harness.modelServer.requests().filter((r) => JSON.stringify(r.body).includes(text));

  test('a raw start naming baseDir /etc is refused, naming the folder and the setting, and the file never reaches the model', async () => {
    const passwd = (await readFile('/etc/passwd', 'utf8')).split('\n')[0];
    harness.modelServer.reset();
    const state = await harness.finish(await rawStart('/etc'));
    expect(requestsHolding(passwd)).toEqual([]);
    expect(harness.modelServer.requests()).toEqual([]);
    expect(state.status).toBe('failed');
    expect(state.error?.type).toBe('RUN_NOT_TRUSTED');
    expect(state.error?.message).toContain('names /etc as its pipeline\'s folder (baseDir), a folder this worker does not read pipelines from');
    expect(state.error?.message).toContain(`it reads pipelines only from ${listed}`);
    expect(state.error?.message).toContain('add the folder to AGENT_PIPELINE_PIPELINE_DIRS');
    expect(state.error?.message).toContain('without --files-from-worker');
  });

  test('a folder inside the listed one that is a symlink to /etc is refused as well', async () => {
    const link = path.join(listed, 'link-to-etc');
    await symlink('/etc', link);
    harness.modelServer.reset();
    const state = await harness.finish(await rawStart(link));
    expect(harness.modelServer.requests()).toEqual([]);
    expect(state.status).toBe('failed');
    expect(state.error?.message).toContain(`names ${link} (which leads to /etc) as its pipeline's folder`);
  });

  test('a run whose baseDir is inside the listed folder reads its files there', async () => {
    const team = path.join(listed, 'team');
    await mkdir(team);
    await writeFile(path.join(team, 'passwd'), 'CONTEXT-7f3a: the team\'s own notes.\n');
    harness.modelServer.reset();
    const state = await harness.finish(await rawStart(team));
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    expect(stageOf(state, 'summary').status).toBe('completed');
    expect(requestsHolding('CONTEXT-7f3a')).toHaveLength(1);
  });
});
