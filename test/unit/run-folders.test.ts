import { MockActivityEnvironment } from '@temporalio/testing';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createCloseWorkspace } from '../../src/activities/close-workspace.js';
import type { CloseWorkspaceInput, CloseWorkspaceResult } from '../../src/contracts/activities.js';
import { readEndedMarker, writeEndedMarker } from '../../src/activities/workspace/remove-workspace.js';
import { openRunWorkspace, openStageFolder, toFolderName } from '../../src/activities/workspace/run-workspace.js';
import { otherRunFolder, runFolder } from '../../src/activities/workspace/run-folder.js';
import { listRunsOnDisk } from '../../src/activities/workspace/run-list.js';
import { findRunInputProblems, RUN_INPUT_VERSION } from '../../src/pipeline/run-input.js';
import { git, initRepo } from '../helpers/git-repo.js';
import { commitAll } from '../../src/activities/workspace/git.js';
import { openStageWorktree } from '../../src/activities/workspace/stage-isolation.js';

/*
 * Issue 19, reproduction 1: a run id names a folder under the workspaces root, and that folder is what a clean-up
 * deletes. Each case below deleted or shared something it must not before run folders carried a hash of the id.
 */

/** Where releases before the workers' own folder kept a run's bookkeeping: inside its folder. */
const INTREE = '.agent-pipeline';

let base: string;
let root: string;
beforeEach(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'run-folders-'));
  root = path.join(base, 'workspaces');
  await mkdir(root);
});
afterEach(async () => rm(base, { recursive: true, force: true }));

/** Runs the real closeWorkspace activity as a worker would, for a run with id `runId`. */
async function close(input: Omit<CloseWorkspaceInput, 'status' | 'pushed'>): Promise<CloseWorkspaceResult> {
  const activity = createCloseWorkspace({ workspacesRoot: root });
  const full: CloseWorkspaceInput = { ...input, status: 'completed', pushed: false };
  return new MockActivityEnvironment().run(activity, full);
}

describe('run folders', () => {
  it('of ids that read the same once made safe are distinct, and no id names the root or the folder above it', async () => {
    const slash = await openRunWorkspace(root, { runId: 'feature/x' });
    const underscore = await openRunWorkspace(root, { runId: 'feature_x' });
    expect(slash.dir).not.toBe(underscore.dir);
    for (const id of ['.', '..', '../..', 'a/../..']) {
      const dir = path.join(root, toFolderName(id));
      expect(path.dirname(dir), id).toBe(root);
      expect(path.basename(dir).startsWith('.'), id).toBe(false);
    }
  });

  it('closing run ".." with keep: never leaves the workspaces root and the folder above it alone', async () => {
    await writeFile(path.join(base, 'precious.txt'), 'keep me');
    await close({ runId: '..', keep: 'never' });
    await close({ runId: '.', keep: 'never' });
    expect(await readFile(path.join(base, 'precious.txt'), 'utf8')).toBe('keep me');
    expect(existsSync(root)).toBe(true);
  });

  it('closing a run whose folder is a repository\'s main working tree keeps the repository', async () => {
    const repo = path.join(root, 'checkout');
    await initRepo(repo, { 'README.md': 'mine\n' });
    // Recorded as the folder of run `checkout` (as by a worker before the hash), so that the run adopts it.
    await mkdir(path.join(root, '.agent-pipeline', 'runs', 'checkout'), { recursive: true });
    await writeFile(path.join(root, '.agent-pipeline', 'runs', 'checkout', 'run.json'), JSON.stringify({ runId: 'checkout' }));
    const result = await close({ runId: 'checkout', keep: 'never' });
    expect(existsSync(path.join(repo, '.git'))).toBe(true);
    expect(await readFile(path.join(repo, 'README.md'), 'utf8')).toBe('mine\n');
    expect(result.removed).toBe(false);
    expect(result.warnings.join('\n')).toContain('main working tree');
  });

  it('closing a run whose folder is a symlink leading out of the root deletes nothing', async () => {
    const outside = path.join(base, 'elsewhere');
    await mkdir(outside);
    await writeFile(path.join(outside, 'data.txt'), 'x');
    await symlink(outside, path.join(root, toFolderName('linked')));
    const result = await close({ runId: 'linked', keep: 'never' });
    expect(existsSync(path.join(outside, 'data.txt'))).toBe(true);
    expect(result.warnings.join('\n')).toContain('not inside the workspaces root');
  });

  it('one run\'s clean-up never deletes the work of another whose id reads the same once made safe', async () => {
    const other = await openRunWorkspace(root, { runId: 'feature_x' });
    await writeFile(path.join(other.dir, 'work.txt'), 'unfinished');
    await openRunWorkspace(root, { runId: 'feature/x' });
    await close({ runId: 'feature/x', keep: 'never' });
    expect(await readFile(path.join(other.dir, 'work.txt'), 'utf8')).toBe('unfinished');
  });

  it('of runs started before the hash keep their old folder only when a record names exactly that run', async () => {
    // Recorded in the tree, as workers before the bookkeeping moved out left it.
    await mkdir(path.join(root, 'nightly-1', INTREE), { recursive: true });
    await writeFile(path.join(root, 'nightly-1', INTREE, 'run.json'), JSON.stringify({ runId: 'nightly-1' }));
    expect((await openRunWorkspace(root, { runId: 'nightly-1' })).dir).toBe(path.join(root, 'nightly-1'));
    // Recorded in the workers' own folder: found again on the next opening.
    expect((await openRunWorkspace(root, { runId: 'nightly-1' })).dir).toBe(path.join(root, 'nightly-1'));
    // `feature/x` ran before the change and ended in `feature_x`: a new run `feature_x` gets a folder of its own.
    await mkdir(path.join(root, 'feature_x', INTREE), { recursive: true });
    await writeEndedMarker(path.join(root, 'feature_x', INTREE), { runId: 'feature/x', status: 'completed', endedAt: 1, pushed: false });
    expect((await openRunWorkspace(root, { runId: 'feature_x' })).dir).not.toBe(path.join(root, 'feature_x'));
    expect((await openRunWorkspace(root, { runId: 'feature/x' })).dir).toBe(path.join(root, 'feature_x'));
  });

  it('are never an existing folder that holds no record of the run: not the workers\' own, not anyone\'s (issue 33, item 4)', async () => {
    // The bundle cache of earlier releases, and any folder that happens to bear a run's old-style name.
    for (const name of ['.bundles', '.agent-pipeline', 'shared-notes']) {
      await mkdir(path.join(root, name, 'files'), { recursive: true });
      expect(runFolder(root, { runId: name }), name).toBe(path.join(root, toFolderName(name)));
    }
    const ws = await openRunWorkspace(root, { runId: 'shared-notes' });
    expect(ws.dir).toBe(path.join(root, toFolderName('shared-notes')));
  });
});

describe('bookkeeping of runs started before it moved out of their tree (issue 33)', () => {
  /** A run folder as a worker of the release before left it: its bookkeeping inside it. */
  async function oldLayout(runId: string): Promise<string> {
    const dir = path.join(root, toFolderName(runId));
    const old = path.join(dir, INTREE);
    await mkdir(path.join(old, 'claude', 'projects', 'p'), { recursive: true });
    await mkdir(path.join(old, 'stages', 's1', 'round-1-1-abc'), { recursive: true });
    await writeFile(path.join(old, 'run.json'), JSON.stringify({ runId }));
    await writeFile(path.join(old, '.gitignore'), '*\n');
    await writeFile(path.join(old, 'claude', 'projects', 'p', 'session-1.jsonl'), '{"session":1}\n');
    await writeFile(path.join(old, 'stages', 's1', 'round-1-1-abc', 'attempt-1.jsonl'), '{"line":1}\n');
    await writeFile(path.join(dir, 'work.txt'), 'the agent\'s work');
    return dir;
  }

  it('moves it to the workers\' own folder once, with its sessions and attempt logs, out of the agents\' tree', async () => {
    const dir = await oldLayout('in-flight');
    const ws = await openRunWorkspace(root, { runId: 'in-flight' });
    expect(ws.dir).toBe(dir);
    expect(existsSync(path.join(dir, INTREE))).toBe(false);
    expect(await readFile(path.join(ws.claudeConfigDir, 'projects', 'p', 'session-1.jsonl'), 'utf8')).toBe('{"session":1}\n');
    expect(await readFile(path.join(ws.stageDir('s1'), 'round-1-1-abc', 'attempt-1.jsonl'), 'utf8')).toBe('{"line":1}\n');
    expect(await readFile(path.join(dir, 'work.txt'), 'utf8')).toBe('the agent\'s work');
    // An in-tree folder of that name appearing later is the agent's: it is not moved again.
    await mkdir(path.join(dir, INTREE));
    await writeFile(path.join(dir, INTREE, 'run.json'), JSON.stringify({ runId: 'in-flight' }));
    await openRunWorkspace(root, { runId: 'in-flight' });
    expect(existsSync(path.join(dir, INTREE, 'run.json'))).toBe(true);
  });

  it('never follows a symlink: not the in-tree folder itself, and none planted inside it is kept', async () => {
    const outside = path.join(base, 'outside');
    await mkdir(path.join(outside, 'stages'), { recursive: true });
    await writeFile(path.join(outside, 'run.json'), JSON.stringify({ runId: 'linked' }));
    const linkedDir = path.join(root, toFolderName('linked'));
    await mkdir(linkedDir, { recursive: true });
    await symlink(outside, path.join(linkedDir, INTREE));
    const linked = await openRunWorkspace(root, { runId: 'linked' });
    expect(existsSync(path.join(outside, 'run.json'))).toBe(true);
    expect(await readdir(path.join(outside, 'stages'))).toEqual([]);
    expect(existsSync(path.join(linked.bookkeeping, 'run.json'))).toBe(true);

    const dir = await oldLayout('planted');
    await symlink(outside, path.join(dir, INTREE, 'stages', 's2'));
    const ws = await openRunWorkspace(root, { runId: 'planted' });
    const s2 = await openStageFolder(ws, 's2');
    await writeFile(path.join(s2, 'settings.json'), '{}');
    expect(await readdir(path.join(outside, 'stages'))).toEqual([]);
    expect(existsSync(path.join(outside, 'settings.json'))).toBe(false);
  });

  it('keeps a stage worktree that moved along usable: its repository\'s record is pointed at its new place', async () => {
    const repo = path.join(base, 'repo');
    await initRepo(repo, { 'README.md': 'hello\n' });
    const dir = path.join(root, toFolderName('isolated'));
    await git(repo, 'worktree', 'add', '--quiet', '-b', 'agent/isolated', dir, 'main');
    await mkdir(path.join(dir, INTREE, 'worktrees'), { recursive: true });
    await writeFile(path.join(dir, INTREE, 'run.json'), JSON.stringify({ runId: 'isolated' }));
    await git(repo, 'worktree', 'add', '--quiet', '-b', 'agent/isolated--s1', path.join(dir, INTREE, 'worktrees', 's1'), 'agent/isolated');
    const run = await openRunWorkspace(root, { runId: 'isolated' }, { git: { repo, branch: 'agent/isolated' } });
    expect(existsSync(path.join(dir, INTREE))).toBe(false);
    const stage = await openStageWorktree(run, repo, 's1');
    expect(stage.dir).toBe(path.join(run.bookkeeping, 'worktrees', 's1'));
    await writeFile(path.join(stage.dir, 'stage.md'), 'from the stage\n');
    expect(await commitAll(stage.dir, 'Stage s1')).toMatch(/^[0-9a-f]{40}$/);
    expect(await git(repo, 'show', 'agent/isolated--s1:stage.md')).toBe('from the stage');
  });

  it('refuses to write a stage\'s bookkeeping through a symlink, naming it', async () => {
    const ws = await openRunWorkspace(root, { runId: 'refused' });
    const outside = path.join(base, 'elsewhere');
    await mkdir(outside);
    await mkdir(path.join(ws.bookkeeping, 'stages'));
    await symlink(outside, ws.stageDir('s3'));
    await expect(openStageFolder(ws, 's3')).rejects.toThrow(`${ws.stageDir('s3')} is a symlink; the worker never writes its own files through it`);
  });
});

describe('the ended record', () => {
  it('names the Temporal run that ended, and goes when the folder is opened again', async () => {
    const ws = await openRunWorkspace(root, { runId: 'reused' });
    await close({ runId: 'reused', keep: 'always' });
    const marker = await readEndedMarker(ws.bookkeeping);
    expect(marker).toMatchObject({ runId: 'reused', status: 'completed' });
    expect(marker?.temporalRunId).toEqual(expect.any(String));
    await openRunWorkspace(root, { runId: 'reused' });
    expect(existsSync(path.join(ws.bookkeeping, 'ended.json'))).toBe(false);
  });

  it('goes with the run\'s folder and bookkeeping when the run keeps nothing', async () => {
    const ws = await openRunWorkspace(root, { runId: 'gone' });
    const result = await close({ runId: 'gone', keep: 'never' });
    expect(result).toEqual({ removed: true, warnings: [] });
    expect(existsSync(ws.dir)).toBe(false);
    expect(existsSync(ws.bookkeeping)).toBe(false);
    expect(existsSync(path.join(root, '.agent-pipeline', 'runs'))).toBe(true);
  });
});

describe('the workflow\'s input check', () => {
  it('refuses the run ids ".", "..", empty, and any that starts with a dot', () => {
    const input = { version: RUN_INPUT_VERSION, pipeline: { name: 'p', stages: [{ id: 'a', prompt: 'x' }] }, baseDir: '/tmp/p', pipelineFile: 'p.yaml', inputs: {} };
    expect(findRunInputProblems(input, { runId: 'fine-1' })).toEqual([]);
    expect(findRunInputProblems(input, { runId: 'fine.1' })).toEqual([]);
    for (const runId of ['.', '..', '', ' ', '.bundles', '.agent-pipeline', '.x']) {
      expect(findRunInputProblems(input, { runId }).map((p) => p.message).join(), runId).toMatch(/run id/);
    }
    expect(findRunInputProblems(input, { runId: '.bundles' })).toEqual([
      { path: '(run id)', message: expect.stringContaining('run id ".bundles" starts with ".": names starting with a dot under the workspaces folder are the workers\' own') },
    ]);
  });
});

describe('runs that bore one id (a run id used again once its run ended)', () => {
  const first = { runId: 'nightly', firstExecutionRunId: '0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b' };
  // Started a few seconds later: a time-ordered Temporal run id that shares its first eight digits with the first.
  const second = { runId: 'nightly', firstExecutionRunId: '0199a1b2-c3d4-7e5f-9f8e-7d6c5b4a3f2e' };

  it('each have a folder and bookkeeping of their own, named after the id and a hash of their first execution\'s run id', async () => {
    const a = await openRunWorkspace(root, first);
    const b = await openRunWorkspace(root, second);
    expect(a.dir).not.toBe(b.dir);
    expect(a.bookkeeping).not.toBe(b.bookkeeping);
    expect(path.basename(a.dir)).toMatch(new RegExp(`^${toFolderName('nightly')}-[0-9a-f]{12}$`));
    expect(path.basename(a.bookkeeping)).toBe(path.basename(a.dir));
    expect(JSON.parse(await readFile(path.join(b.bookkeeping, 'run.json'), 'utf8'))).toEqual(second);
  });

  it('never take the folder of a run of the id that named no first execution, recorded as its own or not', async () => {
    const before = await openRunWorkspace(root, { runId: 'nightly' });
    await writeFile(path.join(before.dir, 'work.txt'), 'the earlier run\'s');
    expect(runFolder(root, first)).not.toBe(before.dir);
    expect((await openRunWorkspace(root, first)).dir).toBe(runFolder(root, first));
    expect(existsSync(path.join(runFolder(root, first), 'work.txt'))).toBe(false);
    // An earlier run's folder of the same id is told to whoever asks for the others' (a fork under a used id is refused).
    expect(await otherRunFolder(root, second)).toBeDefined();
    expect(await otherRunFolder(root, { runId: 'nightly-2', firstExecutionRunId: 'x' })).toBeUndefined();
  });

  it("never take an in-tree `.agent-pipeline` for bookkeeping an earlier release left there: it is their agent's", async () => {
    const dir = runFolder(root, first);
    await mkdir(path.join(dir, INTREE, 'claude'), { recursive: true });
    await writeFile(path.join(dir, INTREE, 'run.json'), JSON.stringify({ runId: 'nightly' }));
    const ws = await openRunWorkspace(root, first);
    expect(existsSync(path.join(dir, INTREE, 'run.json'))).toBe(true);
    expect(JSON.parse(await readFile(path.join(ws.bookkeeping, 'run.json'), 'utf8'))).toEqual(first);
  });

  it('are each listed for `prune` under their id, their end recorded in their own bookkeeping', async () => {
    await openRunWorkspace(root, first);
    await openRunWorkspace(root, second);
    await close({ ...first, keep: 'always' });
    const runs = await listRunsOnDisk(root);
    expect(runs.map((r) => [r.runId, r.firstExecutionRunId, r.ended?.status])).toEqual(
      expect.arrayContaining([
        ['nightly', first.firstExecutionRunId, 'completed'],
        ['nightly', second.firstExecutionRunId, undefined],
      ]),
    );
    expect(runs).toHaveLength(2);
    // A record copied into another run's bookkeeping does not make that folder its own.
    const b = runFolder(root, second);
    await writeFile(path.join(root, '.agent-pipeline', 'runs', path.basename(b), 'run.json'), JSON.stringify(first));
    expect((await listRunsOnDisk(root)).find((r) => r.name === path.basename(b))?.runId).toBeUndefined();
  });
});
