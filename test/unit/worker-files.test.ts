import { mkdir, mkdtemp, realpath, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openWorkerPipelineFolder } from '../../src/activities/prompt/worker-files.js';
import { readPipelineFile } from '../../src/activities/prompt/pipeline-file.js';
import { workerOptionsFromEnv } from '../../src/worker/env.js';
import { activitiesFor, failureOf, stageInput, startAttempt } from '../helpers/stage-attempt.js';

/*
 * Issue 33, item 6: a run without a bundle reads its pipeline files from `baseDir` on the worker, a folder whoever
 * starts the run names. The worker reads them only inside the folders AGENT_PIPELINE_PIPELINE_DIRS lists, on real
 * paths, and each read checks the folder is still the real path it checked. (The raw start through Temporal, end to
 * end: test/integration/worker-files.test.ts.)
 */

let base: string;
let listed: string;
let elsewhere: string;
beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'worker-files-')));
  listed = path.join(base, 'pipelines');
  elsewhere = path.join(base, 'elsewhere');
  await mkdir(path.join(listed, 'team'), { recursive: true });
  await mkdir(elsewhere);
  await writeFile(path.join(elsewhere, 'secret.md'), 'SECRET-91c2\n');
  await writeFile(path.join(listed, 'team', 'agent.md'), '---\nname: a\n---\nYou write notes.\n');
});
afterEach(async () => rm(base, { recursive: true, force: true }));

const YAML = 'name: p\ncontext: [secret.md]\nstages: [{ id: a, prompt: Write the notes., backend: anthropic-api }]\n';
const attempt = (baseDir: string, pipelineDirs: readonly string[]) =>
  startAttempt(activitiesFor({ workspacesRoot: path.join(base, 'workspaces'), baseURL: 'http://127.0.0.1:1', apiKey: 'sk-test', pipelineDirs }), stageInput(YAML, 'a', { baseDir, runId: 'r1' })).result;

describe('AGENT_PIPELINE_PIPELINE_DIRS', () => {
  it("is read from the worker's environment: folders separated like PATH, * for any, unset for the default", () => {
    expect(workerOptionsFromEnv({ AGENT_PIPELINE_PIPELINE_DIRS: `/srv/pipelines${path.delimiter}/opt/p` }).pipelineDirs).toEqual(['/srv/pipelines', '/opt/p']);
    expect(workerOptionsFromEnv({ AGENT_PIPELINE_PIPELINE_DIRS: '*' }).pipelineDirs).toBe('any');
    expect(workerOptionsFromEnv({}).pipelineDirs).toBeUndefined();
  });

  it('refuses, for good and before any request, a run whose baseDir lies outside the listed folders, naming baseDir, the setting and the fix', async () => {
    const failure = await failureOf(attempt(elsewhere, [listed]));
    expect(failure.type).toBe('CONFIG_INVALID');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain(`names ${elsewhere} as its pipeline's folder (baseDir), a folder this worker does not read pipelines from: it reads pipelines only from ${listed}`);
    expect(failure.message).toContain('add the folder to AGENT_PIPELINE_PIPELINE_DIRS on every worker');
  });

  it('refuses every such run when the setting is unset', async () => {
    const failure = await failureOf(attempt(path.join(listed, 'team'), []));
    expect(failure.message).toContain('AGENT_PIPELINE_PIPELINE_DIRS is not set, so it reads none from its own disk');
  });

  it('refuses a folder inside a listed one that is a symlink leading out', async () => {
    await symlink(elsewhere, path.join(listed, 'link'));
    const failure = await failureOf(openWorkerPipelineFolder([listed], path.join(listed, 'link'), 'a'));
    expect(failure.type).toBe('CONFIG_INVALID');
    expect(failure.message).toContain(`names ${path.join(listed, 'link')} (which leads to ${elsewhere})`);
  });

  it('reads a file only while the folder is still the real path it checked: a folder on its way swapped for a symlink is refused', async () => {
    const folder = await openWorkerPipelineFolder([listed], path.join(listed, 'team'), 'a');
    expect((await readPipelineFile(folder, 'agent.md', 'a', 'agent')).text).toContain('You write notes.');
    // After the check, the folder is replaced by a symlink to one holding a file of the same name.
    await rename(path.join(listed, 'team'), path.join(listed, 'team.orig'));
    await writeFile(path.join(elsewhere, 'agent.md'), 'SECRET-91c2\n');
    await symlink(elsewhere, path.join(listed, 'team'));
    const failure = await failureOf(readPipelineFile(folder, 'agent.md', 'a', 'agent'));
    expect(failure.type).toBe('CONFIG_INVALID');
    expect(failure.message).toContain(`the folder ${folder} now leads to ${elsewhere}: it changed since the run checked it`);
  });
});
