import { createHash } from 'node:crypto';
import path from 'node:path';
import { OUTPUT_CAPS } from '../../pipeline/output-caps.js';
import type { FinalAnswerRef } from '../../pipeline/stage-result.js';
import type { ObjectStore } from '../../store/object-store.js';
import { finalAnswerKey } from '../../store/run-keys.js';
import { recordRun } from '../../store/run-records.js';
import { writeFileAtomic } from '../workspace/run-workspace.js';

/*
 * A stage's whole final answer, when the run state's `answer` is cut (16 KB): kept in the workers' object store under
 * the run's keys, so `final-answer` and `RunHandle.finalAnswer` read it from any host that has the store's settings,
 * without parsing transcripts. The result carries a reference (key, size, hash), never the text.
 */

/** Where an attempt keeps its whole answer. */
export interface FinalAnswerPlace {
  runId: string;
  /** The run's namespace, recorded beside its objects for the store's sweep (store/run-records.ts). */
  namespace?: string;
  /** The workers' object store (encrypting when they encrypt); without one, the answer goes to the bookkeeping. */
  store?: ObjectStore;
  /** The attempt's transcript (`…/attempt-N.jsonl`): the bookkeeping copy is written beside it. */
  transcriptPath: string;
  /** What a bookkeeping copy's key is relative to. */
  workspacesRoot: string;
}

/** Writes `text` (cut to `OUTPUT_CAPS.wholeAnswerBytes`) to the store, or else beside the transcript, and returns its reference. */
export async function keepFinalAnswer(text: string, place: FinalAnswerPlace): Promise<FinalAnswerRef> {
  const data = Buffer.from(text, 'utf8').subarray(0, OUTPUT_CAPS.wholeAnswerBytes);
  const sha256 = createHash('sha256').update(data).digest('hex');
  if (place.store) {
    const key = finalAnswerKey(place.runId, sha256);
    if (place.namespace) await recordRun(place.store, { runId: place.runId, namespace: place.namespace });
    // A store's put is whole or nothing, as the bookkeeping's temp file and rename is.
    await place.store.put(key, data);
    return { key, bytes: data.length, sha256, store: true };
  }
  const file = place.transcriptPath.replace(/\.jsonl$/, '.answer.md');
  await writeFileAtomic(file, data);
  return { key: path.relative(place.workspacesRoot, file).split(path.sep).join('/'), bytes: data.length, sha256 };
}
