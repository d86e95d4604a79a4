import path from 'node:path';
import { readRecord } from '../workspace/own-files.js';
import { writeFileAtomic } from '../workspace/run-workspace.js';

/*
 * The checkpoint a host's copy of a run is as new as: written after this host took a checkpoint or restored one.
 * When the store holds a newer one (another worker ran the run meanwhile), the copy here is older and is replaced.
 * Kept in the run's bookkeeping, never checkpointed itself.
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
