import { lstat } from 'node:fs/promises';
import path from 'node:path';
import type { RunRef } from '../../pipeline/run-state.js';
import type { ObjectStore } from '../../store/object-store.js';
import { runKeyPrefix } from '../../store/run-keys.js';
import { RUN_RECORD_OBJECT } from '../../store/run-records.js';
import { ensureRealDir, readRecord } from '../workspace/own-files.js';
import { otherRunFolder, runPaths } from '../workspace/run-folder.js';
import { recordRunId, writeFileAtomic } from '../workspace/run-workspace.js';
import { openWorkerSubfolder } from '../workspace/worker-folder.js';
import { forkRefused } from './fork-refused.js';

/*
 * A fork's run id must be new (docs/forking.md, "Trust"). The client starts a fork only under an id no run has had
 * (REJECT_DUPLICATE), but a run started past the client, with Temporal's own CLI or SDK and a fork input, may take the
 * id of a run that has ended, or its source's. A fork started by a workflow of a release before runs had folders of
 * their own (run-folder.ts) then worked in that run's folder (kept as if an earlier try of the fork had laid it out) and
 * wrote its checkpoints under that run's keys in the store, beside and over that run's. So before it lays anything
 * out, the worker checks that nothing of another run bears the fork's id, and claims the fork's folder for this
 * execution, which an activity retried after a partial lay-out then finds as its own.
 */

/** In the fork's bookkeeping from before its workspace is laid out: which execution claimed the run id's folder. */
const FORK_CLAIM = 'fork-claim.json';
/** Objects a fork's own start may have put under its id in the store before its first step: a claimed input payload and its record. */
const OWN_START_OBJECTS = ['claims/', RUN_RECORD_OBJECT];

/** The fork being checked: the run, its execution (Temporal's run id of this start), its source, where the worker keeps runs. */
export interface ForkIdentity extends RunRef {
  execution: string;
  sourceRunId: string;
  workspacesRoot: string;
}

/** What a person does about a fork id that is not new. */
const NEW_ID_FIX = 'fork under an id no run has had (`agent-pipeline fork` picks one, and refuses an --id a run had); a fork started past the command line must do the same';

/**
 * Refuses a fork that names its own run id as its source, before the source is read: that read would find the fork.
 * @throws FORK_REFUSED
 */
export function refuseOwnSource(runId: string, sourceRunId: string): void {
  if (runId === sourceRunId) throw forkRefused(`run ${runId} names itself as the source it forks: a fork is a new run, beside its source`, NEW_ID_FIX);
}

/**
 * Refuses a fork whose run id another run has used, then claims the id's folder for this execution.
 * @throws FORK_REFUSED naming the run id and what of another run bears it
 */
export async function claimForkId(fork: ForkIdentity, store: ObjectStore): Promise<void> {
  const paths = runPaths(fork.workspacesRoot, fork);
  const claim = path.join(paths.bookkeeping, FORK_CLAIM);
  const held = (await exists(paths.dir)) || (await exists(paths.bookkeeping));
  const taken = held && (await readRecord<{ execution?: unknown }>(claim))?.execution !== fork.execution ? paths.dir : await otherRunFolder(fork.workspacesRoot, fork);
  if (taken !== undefined) throw forkRefused(`run id ${fork.runId} has a folder on this worker already (${taken}), of a run that had the id before this fork`, NEW_ID_FIX);
  const stored = await firstForeignObject(store, fork.runId);
  if (stored) throw forkRefused(`run id ${fork.runId} has objects in ${store.description} already (${stored}), of a run that had the id before this fork`, NEW_ID_FIX);
  if (held) return;
  const bookkeeping = await ensureRealDir(await openWorkerSubfolder(fork.workspacesRoot, 'runs'), path.basename(paths.bookkeeping));
  // The claim first: a try that stops after it finds the folder its own on the next try.
  await writeFileAtomic(path.join(bookkeeping, FORK_CLAIM), `${JSON.stringify({ execution: fork.execution, source: fork.sourceRunId })}\n`);
  // Named as every run's bookkeeping is, so that `prune` knows whose it is should the fork end before its workspace.
  await recordRunId(bookkeeping, fork);
}

/** The first object under run `runId`'s keys that its own start did not write (a checkpoint, an answer…), or undefined. */
async function firstForeignObject(store: ObjectStore, runId: string): Promise<string | undefined> {
  const prefix = runKeyPrefix(runId);
  for await (const key of store.list(prefix)) {
    const name = key.slice(prefix.length);
    if (!OWN_START_OBJECTS.some((own) => (own.endsWith('/') ? name.startsWith(own) : name === own))) return name;
  }
  return undefined;
}

async function exists(file: string): Promise<boolean> {
  return (await lstat(file).catch(() => undefined)) !== undefined;
}
