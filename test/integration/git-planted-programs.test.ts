import { execa } from 'execa';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pushBranch, branchDiff } from '../../src/activities/delivery/push.js';
import { commitAll } from '../../src/activities/workspace/git.js';
import { removeRunWorkspace } from '../../src/activities/workspace/remove-workspace.js';
import { runFolder } from '../../src/activities/workspace/run-folder.js';
import { openRunWorkspace, type RunWorkspace } from '../../src/activities/workspace/run-workspace.js';
import { mergeStageBranch, openStageWorktree } from '../../src/activities/workspace/stage-isolation.js';
import { cloneBare, git, initRepo } from '../helpers/git-repo.js';

/*
 * A repository whose hooks, `core.hooksPath` (in a worktree's own config), `core.fsmonitor`, `diff.external` and
 * `core.sshCommand` all name a program that records that it ran and dumps its environment. The worker's real git
 * paths (worktree add, stage commit, stage worktree and merge, the diff for prompts, push with a rebase over ssh,
 * clean-up) must run none of them, while the push still reaches the remote through the operator's ssh command,
 * which gets the token a push may need and no other secret of the worker.
 */

const SECRETS = { GH_TOKEN: 'gh-token-for-the-push', AGENT_PIPELINE_ENCRYPTION_KEY: 'encryption-key-secret', TEMPORAL_API_KEY: 'temporal-key-secret', ANTHROPIC_API_KEY: 'anthropic-key-secret' };
const HOOKS = ['pre-commit', 'prepare-commit-msg', 'commit-msg', 'post-commit', 'pre-merge-commit', 'post-merge', 'post-checkout', 'pre-push', 'pre-rebase', 'post-rewrite', 'reference-transaction', 'post-index-change'];

let base: string;
let repo: string;
let remote: string;
let marks: string;
let root: string;
const saved: Record<string, string | undefined> = {};

/** A program that leaves `marks/<name>` with its environment in it. */
async function planted(file: string, name: string): Promise<string> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, `#!/bin/sh\nenv > '${path.join(marks, name)}'\n`);
  await chmod(file, 0o755);
  return file;
}

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'git-planted-'));
  repo = path.join(base, 'repo');
  remote = path.join(base, 'remote.git');
  marks = path.join(base, 'marks');
  root = path.join(base, 'workspaces');
  await mkdir(marks);
  await initRepo(repo, { 'README.md': '# Widgets\n' });
  await cloneBare(repo, remote);
  // The operator's ssh: records its environment, then runs git's remote side here (`simple`: host, then the command).
  const ssh = path.join(base, 'operator-ssh.sh');
  await writeFile(ssh, `#!/bin/sh\nenv > '${path.join(base, 'operator-ssh.env')}'\nexec sh -c "$2"\n`);
  await chmod(ssh, 0o755);
  await git(repo, 'remote', 'add', 'origin', `ssh://fakehost${remote}`);
  for (const [name, value] of Object.entries({ ...SECRETS, GIT_SSH_COMMAND: ssh, GIT_SSH_VARIANT: 'simple' })) {
    saved[name] = process.env[name];
    process.env[name] = value;
  }
  // Planted last: the test's own git above would run them.
  for (const hook of HOOKS) await planted(path.join(repo, '.git', 'hooks', hook), `hook-${hook}`);
  await git(repo, 'config', 'core.fsmonitor', await planted(path.join(base, 'fsmonitor.sh'), 'fsmonitor'));
  await git(repo, 'config', 'diff.external', await planted(path.join(base, 'external-diff.sh'), 'diff-external'));
  await git(repo, 'config', 'core.sshCommand', await planted(path.join(base, 'repo-ssh.sh'), 'repo-ssh'));
  await git(repo, 'config', 'extensions.worktreeConfig', 'true');
}, 60_000);

afterAll(async () => {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  await rm(base, { recursive: true, force: true });
});

describe('the worker\'s git in a workspace with planted programs', () => {
  it('runs none of them on worktree add, stage commit, stage merge, diff, push with rebase and clean-up, and the push lands', async () => {
    const run: RunWorkspace = await openRunWorkspace(root, { runId: 'run-1' }, { git: { repo, branch: 'agent/run-1' } });
    // The worktree's own config (`config.worktree`) names a hooks folder of its own.
    const worktreeHooks = path.join(base, 'worktree-hooks');
    for (const hook of HOOKS) await planted(path.join(worktreeHooks, hook), `worktree-hook-${hook}`);
    await execa('git', ['-c', 'core.fsmonitor=false', 'config', '--worktree', 'core.hooksPath', worktreeHooks], { cwd: run.dir });

    await writeFile(path.join(run.dir, 'notes.md'), 'notes\n');
    expect(await commitAll(run.dir, 'Stage notes')).toMatch(/^[0-9a-f]{40}$/);

    const stage = await openStageWorktree(run, repo, 'review');
    await writeFile(path.join(stage.dir, 'review.md'), 'reviewed\n');
    expect(await commitAll(stage.dir, 'Stage review')).toMatch(/^[0-9a-f]{40}$/);
    // Another stage landed on the run's branch meanwhile: the merge is a real merge, not a fast-forward.
    await writeFile(path.join(run.dir, 'plan.md'), 'plan\n');
    expect(await commitAll(run.dir, 'Stage plan')).toMatch(/^[0-9a-f]{40}$/);
    expect(await mergeStageBranch(run, 'review')).toMatchObject({ kind: 'merged' });
    expect(await branchDiff(run.dir, repo, 'main')).toContain('+reviewed');

    // Someone else pushed to the run's branch first: the push is rejected, pulls with rebase (over ssh too), pushes again.
    const clone = path.join(base, 'elsewhere');
    await git(base, 'clone', '--quiet', remote, clone);
    await git(clone, 'checkout', '--quiet', '-b', 'agent/run-1');
    await writeFile(path.join(clone, 'other.md'), 'from elsewhere\n');
    await git(clone, 'add', '.');
    await git(clone, 'commit', '--quiet', '-m', 'elsewhere');
    await git(clone, 'push', '--quiet', 'origin', 'agent/run-1');
    const pushed = await pushBranch({ dir: run.dir, remote: 'origin', branch: 'agent/run-1', rebaseOnce: true });
    expect(pushed).toMatchObject({ kind: 'pushed', rebased: true });
    // `pull --rebase` lays the merged stages out in a line on top of the remote's commit.
    expect((await git(remote, 'log', '--format=%s', 'agent/run-1')).split('\n').sort()).toEqual(['Stage notes', 'Stage plan', 'Stage review', 'elsewhere', 'initial']);
    expect(await git(remote, 'show', 'agent/run-1:review.md')).toBe('reviewed');

    // The push went through the operator's ssh, which had the push's token and none of the worker's other secrets.
    const sshEnv = await readFile(path.join(base, 'operator-ssh.env'), 'utf8');
    expect(sshEnv).toContain(`GH_TOKEN=${SECRETS.GH_TOKEN}`);
    for (const secret of [SECRETS.AGENT_PIPELINE_ENCRYPTION_KEY, SECRETS.TEMPORAL_API_KEY, SECRETS.ANTHROPIC_API_KEY]) expect(sshEnv).not.toContain(secret);

    expect(await removeRunWorkspace(root, stage.dir, true)).toEqual([]);
    expect(await readdir(marks)).toEqual([]);
  }, 120_000);

  it('keeps to the worktree\'s own git directory when the agent points its .git at one of its making', async () => {
    const run = await openRunWorkspace(root, { runId: 'run-3' }, { git: { repo, branch: 'agent/run-3' } });
    await rm(marks, { recursive: true, force: true });
    await mkdir(marks);
    // The agent's git directory: hooks, an fsmonitor, and a clean filter its .gitattributes picks for every file.
    const forged = path.join(base, 'forged');
    await execa('git', ['init', '--quiet', forged]);
    for (const hook of HOOKS) await planted(path.join(forged, '.git', 'hooks', hook), `forged-hook-${hook}`);
    const forgedConfig = ['config', '--file', path.join(forged, '.git', 'config')];
    await execa('git', [...forgedConfig, 'core.fsmonitor', await planted(path.join(base, 'forged-fsmonitor.sh'), 'forged-fsmonitor')]);
    await execa('git', [...forgedConfig, 'filter.planted.clean', await planted(path.join(base, 'forged-clean.sh'), 'forged-clean')]);
    await writeFile(path.join(run.dir, '.gitattributes'), '* filter=planted\n');
    await writeFile(path.join(run.dir, '.git'), `gitdir: ${path.join(forged, '.git')}\n`);

    await writeFile(path.join(run.dir, 'after.md'), 'after\n');
    const commit = await commitAll(run.dir, 'Stage after the rewrite');
    expect(await git(repo, 'rev-parse', 'agent/run-3')).toBe(commit);
    expect(await git(repo, 'show', 'agent/run-3:after.md')).toBe('after');
    expect(await readdir(marks)).toEqual([]);
  }, 60_000);

  it('runs no git in a run folder whose .git belongs to no worktree of the repository', async () => {
    const dir = runFolder(root, { runId: 'run-4' });
    await execa('git', ['init', '--quiet', dir]);
    await expect(openRunWorkspace(root, { runId: 'run-4' }, { git: { repo, branch: 'agent/run-4' } })).rejects.toThrow(`${dir} holds a .git, but no worktree of ${repo} is there`);
  }, 60_000);

  it('the plants are live: git run the ordinary way runs them with the worker\'s secrets', async () => {
    const run = await openRunWorkspace(root, { runId: 'run-2' }, { git: { repo, branch: 'agent/run-2' } });
    await rm(marks, { recursive: true, force: true });
    await mkdir(marks);
    await writeFile(path.join(run.dir, 'more.md'), 'more\n');
    await execa('git', ['-c', 'user.name=x', '-c', 'user.email=x@localhost', 'commit', '--quiet', '--allow-empty', '-m', 'plain'], { cwd: run.dir });
    await execa('git', ['status'], { cwd: run.dir });
    const ran = await readdir(marks);
    expect(ran).toEqual(expect.arrayContaining(['hook-pre-commit', 'hook-post-commit', 'fsmonitor']));
    expect(await readFile(path.join(marks, 'fsmonitor'), 'utf8')).toContain(SECRETS.ANTHROPIC_API_KEY);
  }, 60_000);
});
