import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runFolder } from '../../src/activities/workspace/run-folder.js';
import { workerOptionsFromEnv } from '../../src/worker/env.js';
import { initRepo } from '../helpers/git-repo.js';
import { activitiesFor, failureOf, stageInput, startAttempt } from '../helpers/stage-attempt.js';

/*
 * Issue 19: anyone who can start a run chose any folder of the worker's host as its repository (`workspace.repo`) or
 * an agent's extra folder (`addDirs`). A plain worker now lends none outside its workspaces root unless
 * AGENT_PIPELINE_ALLOWED_PATHS lists it; the violation fails the stage for good before anything is opened.
 */

let base: string;
let root: string;
let repo: string;
beforeEach(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'allowed-paths-'));
  root = path.join(base, 'workspaces');
  repo = path.join(base, 'repo');
  await mkdir(root);
  await initRepo(repo, { 'a.txt': 'a\n' });
});
afterEach(async () => rm(base, { recursive: true, force: true }));

const attempt = (yaml: string, allowedPaths: readonly string[] | 'any') =>
  startAttempt(activitiesFor({ workspacesRoot: root, baseURL: 'http://127.0.0.1:1', allowedPaths }), stageInput(yaml, 'a', { baseDir: base, runId: 'r1' })).result;

describe('AGENT_PIPELINE_ALLOWED_PATHS', () => {
  it('is read from the worker\'s environment: folders separated like PATH, * for any, unset for the default', () => {
    expect(workerOptionsFromEnv({ AGENT_PIPELINE_ALLOWED_PATHS: `/srv/repos${path.delimiter}/data` }).allowedPaths).toEqual(['/srv/repos', '/data']);
    expect(workerOptionsFromEnv({ AGENT_PIPELINE_ALLOWED_PATHS: '*' }).allowedPaths).toBe('any');
    expect(workerOptionsFromEnv({}).allowedPaths).toBeUndefined();
  });

  it('unset on a plain worker, a run naming a repository outside the workspaces root fails at once, naming the setting', async () => {
    const failure = await failureOf(attempt(`name: p\nworkspace: { repo: ${repo} }\nstages: [{ id: a, prompt: Write the notes., backend: anthropic-api }]\n`, []));
    expect(failure.type).toBe('CONFIG_INVALID');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain(`workspace.repo names ${repo}, a folder this worker does not lend to runs`);
    expect(failure.message).toContain('AGENT_PIPELINE_ALLOWED_PATHS');
  });

  it('refuses an addDirs folder outside the allowed ones, and lets a listed folder through', async () => {
    const yaml = 'name: p\nstages: [{ id: a, prompt: Write the notes., addDirs: [/etc] }]\n';
    const failure = await failureOf(attempt(yaml, [repo]));
    expect(failure.type).toBe('CONFIG_INVALID');
    expect(failure.message).toContain('addDirs names /etc');
    const allowed = await failureOf(attempt(`name: p\nworkspace: { repo: ${repo} }\nstages: [{ id: a, prompt: Write the notes., backend: anthropic-api }]\n`, [repo]));
    expect(allowed.message).not.toContain('does not lend');
  });

  it('lends a run nothing of the workspaces root but its own: not the root, not another run\'s folder', async () => {
    const other = runFolder(root, { runId: 'someone-else' });
    await mkdir(other, { recursive: true });
    for (const [dir, why] of [[root, 'which holds the workers\' own folder'], [other, 'a folder this worker does not lend to runs']]) {
      const failure = await failureOf(attempt(`name: p\nstages: [{ id: a, prompt: Write the notes., addDirs: [${dir}] }]\n`, []));
      expect(failure.type).toBe('CONFIG_INVALID');
      expect(failure.message).toContain(`addDirs names ${dir}, ${why}`);
    }
    const lent = await failureOf(attempt(`name: p\nworkspace: { dir: ${other} }\nstages: [{ id: a, prompt: Write the notes., backend: anthropic-api }]\n`, []));
    expect(lent.message).toContain(`workspace.dir names ${other}, a folder this worker does not lend to runs`);
  });

  it('never lends the workers\' own folder (bookkeeping, file cache), nor a folder holding it, whatever the setting allows (issue 33)', async () => {
    const cache = path.join(root, '.agent-pipeline', 'bundles', 'a'.repeat(64), 'files');
    await mkdir(cache, { recursive: true });
    for (const allowed of [[base], 'any'] as const) {
      for (const [dir, how] of [[cache, 'lies in'], [base, 'holds']]) {
        const failure = await failureOf(attempt(`name: p\nworkspace: { dir: ${dir} }\nstages: [{ id: a, prompt: Write the notes., backend: anthropic-api }]\n`, allowed));
        expect(failure.type).toBe('CONFIG_INVALID');
        expect(failure.message).toContain(`workspace.dir names ${dir}, which ${how} the workers' own folder ${path.join(root, '.agent-pipeline')}`);
      }
    }
    // A repository may hold the workspaces folder (`repo: .` in a project that keeps it inside): agents work in worktrees.
    await initRepo(base);
    const repoHolding = await failureOf(attempt(`name: p\nworkspace: { repo: ${base} }\nstages: [{ id: a, prompt: Write the notes., backend: anthropic-api }]\n`, [base]));
    expect(repoHolding.message).not.toContain('workers\' own folder');
  });
});
