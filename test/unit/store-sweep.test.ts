import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { FileStore } from '../../src/store/file-store.js';
import { runKeyPrefix } from '../../src/store/run-keys.js';
import { recordedRuns, recordRun, sweepGoneRuns } from '../../src/store/run-records.js';

/*
 * The store's sweep (store/run-records.ts) on a real folder store: it deletes the objects of runs of its own namespace
 * that Temporal no longer keeps, and nothing else: not live runs, not another namespace's, not a prefix whose record
 * names another run.
 */

describe('the store sweep', () => {
  let dir: string;
  let store: FileStore;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'store-sweep-'));
    store = new FileStore(dir);
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const keys = async (): Promise<string[]> => {
    const all: string[] = [];
    for await (const key of store.list('runs/')) all.push(key);
    return all.sort();
  };

  test('deletes the objects of gone runs of its namespace only', async () => {
    for (const [runId, namespace] of [['gone', 'default'], ['live', 'default'], ['gone', 'other']] as const) {
      await recordRun(store, { runId, namespace });
      await store.put(`${runKeyPrefix(runId)}checkpoints/c1/manifest.json`, Buffer.from('{}'));
    }
    // `gone` of namespace `other` shares the prefix of `gone` (the same run id): its record was overwritten by the later
    // write, so the sweep of `default` sees it as `other`'s and keeps it.
    const deleted = await sweepGoneRuns(store, 'other', async (runId) => runId === 'gone');
    expect(deleted).toEqual(['gone']);
    expect((await keys()).every((k) => k.startsWith(runKeyPrefix('live')))).toBe(true);
    expect(await sweepGoneRuns(store, 'default', async () => false)).toEqual([]);
    expect(await keys()).toHaveLength(2);
  });

  test('leaves a prefix whose record names another run, and runs it cannot ask about', async () => {
    await store.put(`${runKeyPrefix('victim')}run.json`, Buffer.from(JSON.stringify({ runId: 'attacker', namespace: 'default' })));
    await store.put(`${runKeyPrefix('victim')}checkpoints/c1/manifest.json`, Buffer.from('{}'));
    await recordRun(store, { runId: 'unknown', namespace: 'default' });
    const runs = [];
    for await (const run of recordedRuns(store)) runs.push(run.runId);
    expect(runs).toEqual(['unknown']);
    expect(await sweepGoneRuns(store, 'default', async () => { throw new Error('Temporal is down'); })).toEqual([]);
    expect(await keys()).toHaveLength(3);
  });
});
