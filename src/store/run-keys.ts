import { createHash } from 'node:crypto';

/*
 * Where a run's objects live in the store: `runs/<sha256 of the run id>/…` (checkpoints, bookkeeping). The run id is
 * hashed so that no value a run brings becomes a key; everything of one run shares one prefix, which `prune` deletes.
 * Claimed payloads (`claims/<sha256>`) are shared by content and are not under it (docs/deployment.md).
 */

/** The prefix of run `runId`'s objects, ending in `/`. */
export function runKeyPrefix(runId: string): string {
  return `runs/${createHash('sha256').update(runId, 'utf8').digest('hex')}/`;
}
