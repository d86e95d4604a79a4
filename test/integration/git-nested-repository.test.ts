import { existsSync } from 'node:fs';
import { appendFile, chmod, mkdir, mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { branchDiff, pushBranch } from '../../src/activities/delivery/push.js';
import { openPullRequest } from '../../src/activities/delivery/pull-request.js';
import { commitAll, git as workerGit } from '../../src/activities/workspace/git.js';
import { NestedRepositoryError } from '../../src/activities/workspace/nested-repositories.js';
import { removeRunWorkspace, writeEndedMarker } from '../../src/activities/workspace/remove-workspace.js';
import { openRunWorkspace, type RunWorkspace } from '../../src/activities/workspace/run-workspace.js';
import { mergeStageBranch, openStageWorktree } from '../../src/activities/workspace/stage-isolation.js';
import { cloneBare, git, initRepo } from '../helpers/git-repo.js';
import { runCli } from './cli-helpers.js';

/*
 * Issue 33, item 2: a repository the agent makes inside the run's worktree carries a config of its choosing. Once the
 * worker's git takes its folder for a submodule (a first stage commit records it as one; or the repository tracks a
 * submodule there, whose empty folder the agent fills), git checks whether it is dirty by starting another git inside
 * it, with its config: its clean filter runs as the worker's user, outside the sandbox. Here the filter leaves a
 * marker; through every git the worker runs (stage commit, status, diff, the conflict listing, `{{workspace.diff}}`,
 * the merge of `isolation: stage`, push with `pull --rebase` against a bare remote, worktree add, remove and prune,
 * the `prune` command, and `gh pr create`'s own `git status`), the marker never appears.
 */

let base: string;
let repo: string;
let remote: string;
let root: string;
let marker: string;
let filter: string;

/** The planted repositories, each touched again before every git of the worker (see {@link touchPlanted}). */
const planted = new Set<string>();

/**
 * What the agent's Bash does (as in the report): a repository at `folder` with its git directory beside it, whose
 * `a.txt` its `.gitattributes` gives the filter `x`; then `filter.x.clean` set to its script and `a.txt` touched, so the
 * next git that asks whether the folder is dirty runs the filter.
 */
async function plantRepository(worktree: string, folder: string): Promise<void> {
  const nested = path.join(worktree, folder);
  const plain = (...args: string[]) => execa('git', ['-c', 'user.name=agent', '-c', 'user.email=agent@localhost', ...args], { cwd: nested });
  await execa('git', ['init', '--quiet', `--separate-git-dir=${path.join(worktree, `${folder}-gd`)}`, nested]);
  await writeFile(path.join(nested, '.gitattributes'), 'a.txt filter=x\n');
  await writeFile(path.join(nested, 'a.txt'), 'one\n');
  await plain('add', '--all');
  await plain('commit', '--quiet', '-m', 'planted');
  await plain('config', 'filter.x.clean', filter);
  planted.add(path.join(nested, 'a.txt'));
  await touchPlanted();
}

let touches = 0;
/**
 * Gives each planted `a.txt` a modification time it never had: its size is what the nested index records, so a git
 * that asks whether it changed must read it through its clean filter. (A git that did so updates the nested index,
 * after which the file looks unchanged; hence a new time before each call.)
 */
async function touchPlanted(): Promise<void> {
  touches += 1;
  for (const file of planted) if (existsSync(file)) await utimes(file, 1_000_000 + touches, 1_000_000 + touches);
}

/** Whether the planted filter ran (and where). */
async function filterRuns(): Promise<string> {
  return existsSync(marker) ? readFile(marker, 'utf8') : '';
}

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'git-nested-'));
  repo = path.join(base, 'repo');
  remote = path.join(base, 'remote.git');
  root = path.join(base, 'workspaces');
  marker = path.join(base, 'filter-ran');
  filter = path.join(base, 'clean-filter.sh');
  await writeFile(filter, `#!/bin/sh\necho "$PWD" >> '${marker}'\ncat\n`);
  await chmod(filter, 0o755);
  // The repository tracks a submodule at `lib` (a gitlink and its .gitmodules entry): a worktree has it as an empty folder.
  await initRepo(repo, { 'README.md': '# Widgets\n', '.gitmodules': '[submodule "lib"]\n\tpath = lib\n\turl = ./lib-upstream\n' });
  await git(repo, 'update-index', '--add', '--cacheinfo', `160000,${await git(repo, 'rev-parse', 'HEAD')},lib`);
  await git(repo, 'commit', '--quiet', '-m', 'lib as a submodule');
  await cloneBare(repo, remote);
  await git(repo, 'remote', 'add', 'origin', remote);
}, 60_000);

afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

beforeEach(async () => {
  await rm(marker, { force: true });
  await touchPlanted();
});

describe('a repository the agent made in the run\'s worktree', () => {
  it('fails the stage commit, naming its folder, and stages nothing of it', async () => {
    const run = await openRunWorkspace(root, { runId: 'run-1' }, { git: { repo, branch: 'agent/run-1' } });
    const before = await git(repo, 'rev-parse', 'agent/run-1');
    await plantRepository(run.dir, 'sub');
    await writeFile(path.join(run.dir, 'notes.md'), 'notes\n');

    const refused = await commitAll(run.dir, 'Stage notes').catch((err: unknown) => err);
    expect(refused, 'the stage commit went ahead over the planted repository').toBeInstanceOf(NestedRepositoryError);
    expect((refused as Error).message).toContain('a .git in "sub"');
    expect((refused as Error).message).toContain('remove that .git (or its folder)');
    expect(await git(repo, 'rev-parse', 'agent/run-1')).toBe(before);
    // Refused again on the next stage: before the fix, the first commit recorded `sub` as a submodule and this one ran its filter.
    await expect(commitAll(run.dir, 'Stage more')).rejects.toThrow('a .git in "sub"');
    expect(await filterRuns()).toBe('');

    // Once the .git is gone, the folder is plain files and the stage commits.
    await rm(path.join(run.dir, 'sub', '.git'));
    expect(await commitAll(run.dir, 'Stage notes')).toMatch(/^[0-9a-f]{40}$/);
    expect(await git(repo, 'show', 'agent/run-1:sub/a.txt')).toBe('one');
    expect(await filterRuns()).toBe('');
  }, 60_000);

  it('never stages a folder of the old bookkeeping folder\'s name, whatever its .gitignore says', async () => {
    // Runs started before the bookkeeping moved out had it in their tree; an agent may make one there too.
    const run = await openRunWorkspace(root, { runId: 'run-5' }, { git: { repo, branch: 'agent/run-5' } });
    await rm(path.join(run.dir, '.agent-pipeline', '.gitignore'), { force: true });
    await plantRepository(path.join(run.dir, '.agent-pipeline'), 'hidden');
    await writeFile(path.join(run.dir, 'work.md'), 'work\n');
    expect(await commitAll(run.dir, 'Stage work')).toMatch(/^[0-9a-f]{40}$/);
    expect((await git(repo, 'ls-tree', '-r', '--name-only', 'agent/run-5')).split('\n')).not.toContain('.agent-pipeline/hidden');
    expect(await commitAll(run.dir, 'Stage again')).toBeUndefined();
    expect(await filterRuns()).toBe('');
  }, 60_000);
});

describe('a submodule folder the agent filled with a repository of its own', () => {
  let run: RunWorkspace;

  beforeAll(async () => {
    run = await openRunWorkspace(root, { runId: 'run-2' }, { git: { repo, branch: 'agent/run-2' } });
    // Two stages under `isolation: stage` opened from the run's branch: `review` adds a file, `clash` rewrites plan.md.
    const review = await openStageWorktree(run, repo, 'review');
    await writeFile(path.join(review.dir, 'review.md'), 'reviewed\n');
    await commitAll(review.dir, 'Stage review');
    const clash = await openStageWorktree(run, repo, 'clash');
    await writeFile(path.join(clash.dir, 'plan.md'), 'their plan\n');
    await commitAll(clash.dir, 'Stage clash');
    await writeFile(path.join(run.dir, 'plan.md'), 'our plan\n');
    await commitAll(run.dir, 'Stage plan');
    await plantRepository(run.dir, 'lib');
  }, 60_000);

  it('is refused by the stage commit', async () => {
    await expect(commitAll(run.dir, 'Stage after')).rejects.toThrow('a .git in "lib"');
    expect(await filterRuns()).toBe('');
  });

  it('runs nothing of it on status, diff, the conflict listing and {{workspace.diff}}', async () => {
    for (const args of [['status', '--porcelain'], ['diff'], ['diff', '--name-only', '--diff-filter=U'], ['diff', '--cached', '--quiet']]) {
      await touchPlanted();
      await workerGit(run.dir, args);
      expect(await filterRuns(), `git ${args.join(' ')}`).toBe('');
    }
    await touchPlanted();
    expect(await branchDiff(run.dir, repo, 'main')).toContain('+our plan');
    expect(await filterRuns()).toBe('');
  });

  it('runs nothing of it when merging stage branches, a merge and a conflict', async () => {
    expect(await mergeStageBranch(run, 'review')).toMatchObject({ kind: 'merged' });
    await touchPlanted();
    expect(await mergeStageBranch(run, 'clash')).toMatchObject({ kind: 'conflict', files: ['plan.md'] });
    expect(await filterRuns()).toBe('');
  });

  it('runs nothing of it when the push is rejected, rebases and pushes, or its rebase conflicts', async () => {
    const elsewhere = path.join(base, 'elsewhere');
    await git(base, 'clone', '--quiet', remote, elsewhere);
    await git(elsewhere, 'checkout', '--quiet', '-b', 'agent/run-2');
    await writeFile(path.join(elsewhere, 'other.md'), 'from elsewhere\n');
    await git(elsewhere, 'add', 'other.md');
    await git(elsewhere, 'commit', '--quiet', '-m', 'elsewhere');
    await git(elsewhere, 'push', '--quiet', 'origin', 'agent/run-2');
    expect(await pushBranch({ dir: run.dir, remote: 'origin', branch: 'agent/run-2', rebaseOnce: true })).toMatchObject({ kind: 'pushed', rebased: true });
    expect(await git(remote, 'show', 'agent/run-2:review.md')).toBe('reviewed');
    expect(await filterRuns()).toBe('');

    await git(elsewhere, 'pull', '--quiet', '--rebase', 'origin', 'agent/run-2');
    await writeFile(path.join(elsewhere, 'plan.md'), 'a plan from elsewhere\n');
    await git(elsewhere, 'commit', '--quiet', '-am', 'elsewhere again');
    await git(elsewhere, 'push', '--quiet', 'origin', 'agent/run-2');
    await writeFile(path.join(run.dir, 'plan.md'), 'our plan, revised\n');
    await git(run.dir, '-c', 'core.hooksPath=/dev/null', 'commit', '--quiet', '--only', '-m', 'revise', '--', 'plan.md');
    await rm(marker, { force: true }); // whatever the test's own plain git did: only the worker's counts below
    await touchPlanted();
    expect(await pushBranch({ dir: run.dir, remote: 'origin', branch: 'agent/run-2', rebaseOnce: true })).toMatchObject({ kind: 'conflict', files: ['plan.md'] });
    expect(await filterRuns()).toBe('');
  }, 60_000);

  it('opens no pull request through gh, whose own git status would run it, and says why', async () => {
    // gh runs `git status` in the worktree; a .gitmodules the agent rewrote overrides diff.ignoreSubmodules for it.
    await appendFile(path.join(run.dir, '.gitmodules'), '\tignore = none\n');
    const bin = path.join(base, 'bin');
    await mkdir(bin, { recursive: true });
    await writeFile(path.join(bin, 'gh'), '#!/bin/sh\ncase "$1 $2" in\n  "auth status") exit 0 ;;\n  "pr create") git status --porcelain >/dev/null; echo https://github.com/acme/widgets/pull/8 ;;\nesac\n');
    await chmod(path.join(bin, 'gh'), 0o755);
    await touchPlanted();
    const opened = await openPullRequest({ dir: run.dir, remote: 'origin', branch: 'agent/run-2', title: 'Widgets', body: '', draft: false, env: { ...process.env, PATH: `${bin}${path.delimiter}${process.env.PATH}` } });
    expect(await filterRuns()).toBe('');
    expect(opened.url).toBeUndefined();
    expect(opened.warnings.join('\n')).toContain('no pull request was opened: the worker did not run `gh pr create`: the workspace holds a git repository the agent made (a .git in "lib")');
  });

  it('runs nothing of it on worktree add, remove and prune, nor in the prune command', async () => {
    // Another run's worktree from a branch that holds the submodule, and the worktree clean-up of this one.
    const other = await openRunWorkspace(root, { runId: 'run-3' }, { git: { repo, branch: 'agent/run-3', base: 'agent/run-2' } });
    expect(existsSync(path.join(other.dir, 'plan.md'))).toBe(true);
    await touchPlanted();
    await removeRunWorkspace(root, path.join(run.bookkeeping, 'worktrees', 'review'), true);
    await removeRunWorkspace(root, run.dir, true);
    expect(existsSync(run.dir)).toBe(false);
    await openRunWorkspace(root, { runId: 'run-4' }, { git: { repo, branch: 'agent/run-4' } }); // runs `git worktree prune`
    expect(await filterRuns()).toBe('');

    // `prune` in a process of its own, which has opened no worktree: it finds the repository from the folder's .git.
    await plantRepository(other.dir, 'lib');
    await rm(marker, { force: true });
    await writeEndedMarker(other.bookkeeping, { runId: 'run-3', status: 'completed', endedAt: Date.now() - 86_400_000, pushed: true });
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: '127.0.0.1:1', AGENT_PIPELINE_WORKSPACES: root };
    const pruned = await runCli(['prune', '--force', '--older-than', '1h'], env);
    expect(pruned.exitCode, pruned.all).toBe(0);
    expect(existsSync(other.dir)).toBe(false);
    expect(await filterRuns()).toBe('');
  }, 60_000);
});
