import { MockActivityEnvironment } from '@temporalio/testing';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createCloseWorkspace } from '../../src/activities/close-workspace.js';
import type { CloseWorkspaceInput, CloseWorkspaceResult } from '../../src/contracts/activities.js';
import { readEndedMarker, writeEndedMarker } from '../../src/activities/workspace/remove-workspace.js';
import { INTERNAL_DIR, openRunWorkspace, toFolderName } from '../../src/activities/workspace/run-workspace.js';
import { findRunInputProblems, RUN_INPUT_VERSION } from '../../src/pipeline/run-input.js';
import { initRepo } from '../helpers/git-repo.js';

/*
 * Issue 19, reproduction 1: a run id names a folder under the workspaces root, and that folder is what a clean-up
 * deletes. Each case below deleted or shared something it must not before run folders carried a hash of the id.
 */

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
    const slash = await openRunWorkspace(root, 'feature/x');
    const underscore = await openRunWorkspace(root, 'feature_x');
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
    const other = await openRunWorkspace(root, 'feature_x');
    await writeFile(path.join(other.dir, 'work.txt'), 'unfinished');
    await openRunWorkspace(root, 'feature/x');
    await close({ runId: 'feature/x', keep: 'never' });
    expect(await readFile(path.join(other.dir, 'work.txt'), 'utf8')).toBe('unfinished');
  });

  it('of runs started before the hash keep their old folder, unless it records another run', async () => {
    await mkdir(path.join(root, 'nightly-1'));
    expect((await openRunWorkspace(root, 'nightly-1')).dir).toBe(path.join(root, 'nightly-1'));
    // `feature/x` ran before the change and ended in `feature_x`: a new run `feature_x` gets a folder of its own.
    await mkdir(path.join(root, 'feature_x'));
    await writeEndedMarker(path.join(root, 'feature_x'), { runId: 'feature/x', status: 'completed', endedAt: 1, pushed: false });
    expect((await openRunWorkspace(root, 'feature_x')).dir).not.toBe(path.join(root, 'feature_x'));
    expect((await openRunWorkspace(root, 'feature/x')).dir).toBe(path.join(root, 'feature_x'));
  });
});

describe('the ended record', () => {
  it('names the Temporal run that ended, and goes when the folder is opened again', async () => {
    const ws = await openRunWorkspace(root, 'reused');
    await close({ runId: 'reused', keep: 'always' });
    const marker = await readEndedMarker(ws.dir);
    expect(marker).toMatchObject({ runId: 'reused', status: 'completed' });
    expect(marker?.temporalRunId).toEqual(expect.any(String));
    await openRunWorkspace(root, 'reused');
    expect(existsSync(path.join(ws.dir, INTERNAL_DIR, 'ended.json'))).toBe(false);
  });
});

describe('the workflow\'s input check', () => {
  it('refuses the run ids ".", ".." and empty', () => {
    const input = { version: RUN_INPUT_VERSION, pipeline: { name: 'p', stages: [{ id: 'a', prompt: 'x' }] }, baseDir: '/tmp/p', pipelineFile: 'p.yaml', inputs: {} };
    expect(findRunInputProblems(input, { runId: 'fine-1' })).toEqual([]);
    for (const runId of ['.', '..', '', ' ']) {
      expect(findRunInputProblems(input, { runId }).map((p) => p.message).join(), runId).toMatch(/run id/);
    }
  });
});
