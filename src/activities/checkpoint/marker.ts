import path from 'node:path';
import { readRecord } from '../workspace/own-files.js';
import { writeFileAtomic } from '../workspace/run-workspace.js';

/*
 * The checkpoint a host's copy of a run is as new as: written after this host took a checkpoint, and by a restore into
 * the restored bookkeeping before that folder moves into place (restore-checkpoint.ts), so no restore leaves a copy
 * without it. When the store holds a newer one (another worker ran the run meanwhile), the copy here is older and is
 * replaced. Kept in the run's bookkeeping, never checkpointed itself.
 */

export const CHECKPOINT_MARKER = 'checkpoint.json';

export interface CheckpointMarker {
  id: string;
  takenAt: string;
}

export async function writeCheckpointMarker(bookkeeping: string, checkpoint: CheckpointMarker): Promise<void> {
  await writeFileAtomic(path.join(bookkeeping, CHECKPOINT_MARKER), `${JSON.stringify({ id: checkpoint.id, takenAt: checkpoint.takenAt })}\n`);
}

export async function readCheckpointMarker(bookkeeping: string): Promise<CheckpointMarker | undefined> {
  const marker = await readRecord<Partial<CheckpointMarker>>(path.join(bookkeeping, CHECKPOINT_MARKER));
  return typeof marker?.id === 'string' && typeof marker.takenAt === 'string' ? { id: marker.id, takenAt: marker.takenAt } : undefined;
}

/**
 * The restore of this host's copy, kept beside the marker (host-local too, never checkpointed): the checkpoint it came
 * from, and the stages that have had an attempt here since, the restoring one first. Each stage of the run that moved
 * here is told of the restore at its first attempt here, whichever attempt restored: parallel stages of a lost host
 * come at once, or one later than the other (a longer `heartbeatTimeout`), and the later one finds the run in place.
 */
export const RESTORE_RECORD = 'restored.json';

export interface RestoreRecord extends CheckpointMarker {
  /** Stage ids, each once: at most the pipeline's stages. */
  stages: string[];
  /**
   * With a git workspace, until the worktree holds it: the checkpoint's uncommitted work, which is laid out only once
   * the worktree is open again (after the restore). A worker killed before that left a worktree at the branch's tip;
   * the next attempt finds this and lays the work out again.
   */
  work?: string;
}

export async function writeRestoreRecord(bookkeeping: string, record: RestoreRecord): Promise<void> {
  const { id, takenAt, stages, work } = record;
  await writeFileAtomic(path.join(bookkeeping, RESTORE_RECORD), `${JSON.stringify(work === undefined ? { id, takenAt, stages } : { id, takenAt, stages, work })}\n`);
}

export async function readRestoreRecord(bookkeeping: string): Promise<RestoreRecord | undefined> {
  const record = await readRecord<Partial<RestoreRecord>>(path.join(bookkeeping, RESTORE_RECORD));
  if (typeof record?.id !== 'string' || typeof record.takenAt !== 'string' || !Array.isArray(record.stages)) return undefined;
  const stages = record.stages.filter((stage): stage is string => typeof stage === 'string');
  return { id: record.id, takenAt: record.takenAt, stages, ...(typeof record.work === 'string' ? { work: record.work } : {}) };
}
