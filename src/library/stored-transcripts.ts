import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { newestRunCheckpoint, unpackBookkeeping } from '../activities/checkpoint/read-checkpoint.js';
import type { RunRef } from '../pipeline/run-state.js';
import { openWorkersStore, type ClientStoreSettings } from './client-store.js';
import { listTranscripts, type TranscriptFile } from './transcript-files.js';

/*
 * A stage's transcripts when this host does not see them in the workers' workspaces folder (the host that ran the stage
 * is gone, or is another machine): from the run's newest checkpoint in the workers' object store, as that checkpoint
 * holds them. Only a checkpoint that carries the run's bookkeeping has them (`AGENT_PIPELINE_CHECKPOINTS=on`, the
 * default with an `s3://` store), and only up to when it was taken.
 */

/** Where stored transcripts came from, for what `logs` prints above them. */
export interface TranscriptCheckpoint {
  id: string;
  /** @format ISO 8601 */
  takenAt: string;
  /** The store's URL, without credentials. */
  store: string;
}

/** A stage's transcripts unpacked from a checkpoint into a temp folder, which {@link dispose} removes. */
export interface StoredTranscripts {
  transcripts: TranscriptFile[];
  checkpoint: TranscriptCheckpoint;
  dispose(): Promise<void>;
}

/**
 * The transcripts of stage `stageId` in `run`'s newest checkpoint in the client's store (its own
 * `AGENT_PIPELINE_STORE`, or the default store of the workspaces folder it sees); undefined when that store holds no
 * checkpoint of the run with its bookkeeping, or none of the stage's transcripts.
 * @throws the store's errors, and WORKSPACE_ERROR for a checkpoint whose objects are missing or damaged
 */
export async function readStoredTranscripts(settings: ClientStoreSettings, run: RunRef, stageId: string): Promise<StoredTranscripts | undefined> {
  const store = openWorkersStore(settings);
  const manifest = store ? await newestRunCheckpoint(store, run) : undefined;
  if (!store || !manifest) return undefined;
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'agent-pipeline-transcripts-'));
  const dispose = () => rm(scratch, { recursive: true, force: true });
  try {
    const bookkeeping = path.join(scratch, 'bookkeeping');
    await unpackBookkeeping({ store }, { runId: run.runId, firstExecutionRunId: run.firstExecutionRunId, stageId }, manifest, scratch, bookkeeping);
    const transcripts = await listTranscripts(path.join(bookkeeping, 'stages', stageId));
    if (transcripts.length === 0) {
      await dispose();
      return undefined;
    }
    return { transcripts, checkpoint: { id: manifest.id, takenAt: manifest.takenAt, store: store.description }, dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}
