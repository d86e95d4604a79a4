import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { readRestoreRecord } from '../../src/activities/checkpoint/marker.js';
import type { CheckpointOptions } from '../../src/activities/checkpoint/settings.js';
import { restoreForAttempt, type AttemptRestore, type AttemptRestorePlace } from '../../src/activities/checkpoint/stage-checkpoints.js';
import { takeCheckpoint } from '../../src/activities/checkpoint/take-checkpoint.js';
import { openRunWorkspace, type RunWorkspace } from '../../src/activities/workspace/run-workspace.js';
import { FileStore } from '../../src/store/file-store.js';
import { stageInput } from '../helpers/stage-attempt.js';

/*
 * The stages of a run whose host was lost, restoring on the new one: at once (parallel stages move together) or one
 * after the other (a longer heartbeatTimeout), with real tar and a folder store. One restores; the others find the run
 * in place, and each is told of the restore at its first attempt here.
 */

const RUN = 'ckpt/parallel';
const PIPELINE = ['name: side-by-side', 'stages:', ...['a', 'b', 'c', 'd'].map((id) => `  - { id: ${id}, prompt: Work. }`), ''].join('\n');

let scratch: string;
let root: string;
let options: CheckpointOptions;

beforeEach(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-parallel-restore-'));
  root = path.join(scratch, 'workspaces');
  options = { store: new FileStore(path.join(scratch, 'store')), everyMs: 60_000, maxBytes: 64 * 1024 * 1024 };
});
afterEach(async () => {
  await rm(scratch, { recursive: true, force: true });
});

/** Stage `stageId`'s attempt (a retry unless `firstStart`) restoring before it runs, as in an activity. */
function restoreFor(workspace: RunWorkspace, stageId: string, firstStart = false): Promise<AttemptRestore | undefined> {
  const place: AttemptRestorePlace = { input: stageInput(PIPELINE, stageId, { baseDir: scratch, runId: RUN }), workspacesRoot: root, firstStart, open: async () => workspace };
  const env = new MockActivityEnvironment({ attempt: firstStart ? 1 : 2 }, { logger: new DefaultLogger('ERROR') });
  return env.run<[CheckpointOptions, AttemptRestorePlace], AttemptRestore | undefined, typeof restoreForAttempt>(restoreForAttempt, options, place);
}

describe('parallel stages of a run restoring on a new host', () => {
  test('restore it once, at once or later, and each is told once; a stage starting afresh is not', async () => {
    const workspace = await openRunWorkspace(root, { runId: RUN });
    await writeFile(path.join(workspace.dir, 'a.txt'), 'a\n');
    await writeFile(path.join(workspace.dir, 'b.txt'), 'b\n');
    const manifest = await takeCheckpoint(options, { runId: RUN, workspacesRoot: root, workspace, kind: 'folder' }, 'periodic');
    await rm(workspace.dir, { recursive: true, force: true });
    await rm(workspace.bookkeeping, { recursive: true, force: true });

    // Both at once: each restoring, the second found the first's folders in place (ENOTEMPTY).
    const told = await Promise.all([restoreFor(workspace, 'a'), restoreFor(workspace, 'b')]);
    expect(told.map((restore) => restore?.id)).toEqual([manifest.id, manifest.id]);
    expect(await readFile(path.join(workspace.dir, 'b.txt'), 'utf8')).toBe('b\n');
    // What a stage wrote once restored is not restored over by a stage coming later.
    await writeFile(path.join(workspace.dir, 'a.txt'), 'a, after the restore\n');
    expect(await restoreFor(workspace, 'c')).toEqual({ id: manifest.id, takenAt: manifest.takenAt, warnings: [] });
    expect(await readFile(path.join(workspace.dir, 'a.txt'), 'utf8')).toBe('a, after the restore\n');
    // A stage's first start has nothing restored to be told of; a stage that ran here since is not told again.
    expect(await restoreFor(workspace, 'd', true)).toBeUndefined();
    expect(await restoreFor(workspace, 'a')).toBeUndefined();
    expect(await restoreFor(workspace, 'd')).toBeUndefined();
    expect((await readRestoreRecord(workspace.bookkeeping))?.stages.sort()).toEqual(['a', 'b', 'c', 'd']);
  });
});
