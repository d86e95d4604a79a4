import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { FileStore } from '../../src/store/file-store.js';
import { runKeyPrefix } from '../../src/store/run-keys.js';
import { recordedRuns, recordRun, sweepGoneRuns } from '../../src/store/run-records.js';
import { ageFiles } from '../helpers/age-files.js';

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
    // As old as a run's objects are once the namespace's retention has passed (the sweep keeps younger ones).
    await ageFiles(dir);
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

  test("writes a later execution's record again after another process deleted the id's objects, as prune does", async () => {
    const run = { runId: 'reused', namespace: 'default' };
    await recordRun(store, run, 'first-execution');
    // `agent-pipeline prune` (its own process, its own store) deletes everything under the id once the run ended.
    await new FileStore(dir).deletePrefix(runKeyPrefix('reused'));
    // A later run of the id starts on this worker: its first stage records it.
    await recordRun(store, run, 'second-execution');
    expect(await keys()).toEqual([`${runKeyPrefix('reused')}run.json`]);
  });

  test("writes a record again once it has trusted its own write for 10 minutes, as another worker's sweep may have deleted it since", async () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    try {
      const run = { runId: 'reused', namespace: 'default' };
      await recordRun(store, run);
      await new FileStore(dir).deletePrefix(runKeyPrefix('reused'));
      // Within the 10 minutes, trusted: no sweep deletes a record written since the hour before its question.
      await recordRun(store, run);
      expect(await keys()).toEqual([]);
      vi.advanceTimersByTime(10 * 60_000);
      await recordRun(store, run);
      expect(await keys()).toEqual([`${runKeyPrefix('reused')}run.json`]);
    } finally {
      vi.useRealTimers();
    }
  });
});
