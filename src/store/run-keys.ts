import { createHash } from 'node:crypto';

/*
 * Where a run's objects live in the store: `runs/<sha256 of the run id>/…` (checkpoints, bookkeeping, whole final
 * answers, claimed payloads). The run id is hashed so that no value a run brings becomes a key; everything of one run
 * shares one prefix, which the store's sweep and `prune` delete (docs/deployment.md).
 */

/** The prefix of run `runId`'s objects, ending in `/`. */
export function runKeyPrefix(runId: string): string {
  return `runs/${createHash('sha256').update(runId, 'utf8').digest('hex')}/`;
}

/**
 * The key of a stage's whole final answer in run `runId`: named by the sha256 of its text, so a retried attempt that
 * gives the same answer writes the same object, and the key holds nothing a run brings.
 */
export function finalAnswerKey(runId: string, sha256: string): string {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new Error(`not a sha256: ${JSON.stringify(sha256.slice(0, 80))}`);
  return `${runKeyPrefix(runId)}answers/${sha256}`;
}

/** Whether `key` has the shape of a final answer's key (of any run): what a reader accepts from a run's state. */
export function isFinalAnswerKey(key: string): boolean {
  return /^runs\/[0-9a-f]{64}\/answers\/[0-9a-f]{64}$/.test(key);
}
