import type { ObjectStore } from '../../store/object-store.js';
import type { RunRef } from '../../pipeline/run-state.js';
import { checkpointKey, listCheckpointEntries, sha256Hex, STAGE_START_OBJECT, type CheckpointEntry } from './keys.js';
import { CHECKPOINT_MAX_BYTES_VARIABLE, CHECKPOINTS_VARIABLE } from './settings.js';
import { readCheckpointManifest, type CheckpointManifest } from './manifest.js';

/*
 * The checkpoint taken when a stage of a run first started: the workspace as the stages before it left it. A fork
 * from that stage starts from it (docs/forking.md). These checkpoints are kept while the run's others are replaced
 * (take-checkpoint.ts), and deleted with the run (`prune`).
 */

/** Largest stage-start marker read (a sha256 in hex). @unit bytes */
const MAX_RECORD_BYTES = 1024 * 1024;

/**
 * The manifest of the checkpoint taken when stage `stage` of `run` first started, or undefined when the store
 * holds none (the stage never started, the run ran without checkpoints, or it was pruned). Only a manifest that names
 * this run and this stage counts; the earliest wins (a rework round or a retry a person asked for may start again).
 */
export async function findStageStartCheckpoint(store: ObjectStore, run: RunRef, stage: string, entries?: CheckpointEntry[]): Promise<CheckpointManifest | undefined> {
  const wanted = sha256Hex(stage);
  for (const { id, stageStart } of entries ?? (await listCheckpointEntries(store, run))) {
    if (!stageStart) continue;
    const marker = await store.get(checkpointKey(run, id, STAGE_START_OBJECT), MAX_RECORD_BYTES);
    if (!marker || Buffer.from(marker).toString('utf8') !== wanted) continue;
    const manifest = await readCheckpointManifest(store, run, id);
    if (manifest?.stage === stage) return manifest;
  }
  return undefined;
}

/** Why a fork from `stage` of run `runId` cannot start, when `store` holds no checkpoint of the stage's first start. */
export function missingForkPoint(runId: string, stage: string, store: ObjectStore): { message: string; fix: string } {
  return {
    message: `run ${runId} has no checkpoint of stage ${stage}'s first start in ${store.description}: the stage never started, the worker that ran it had ${CHECKPOINTS_VARIABLE}=off or could not reach the store then, its workspace was over ${CHECKPOINT_MAX_BYTES_VARIABLE} then (the stage's result warned of it), or the run's checkpoints were deleted (\`prune\`)`,
    fix: 'fork from another stage, or start the pipeline again',
  };
}
