import { createHash } from 'node:crypto';
import path from 'node:path';
import type { FinalAnswerRef } from '../../pipeline/stage-result.js';
import { writeFileAtomic } from '../workspace/run-workspace.js';

/*
 * A stage's whole final answer, when the run state's `answer` is cut (16 KB): kept next to the attempt's transcript in
 * the run's bookkeeping, so `final-answer` and `RunHandle.finalAnswer` read it without parsing transcripts. The result
 * carries a reference (key, size, hash), never the text.
 */

/** The most of one answer kept: far above any model's answer, and an end to a runaway one. @unit bytes */
export const MAX_FINAL_ANSWER_BYTES = 32 * 1024 * 1024;

/**
 * Writes `text` (cut to {@link MAX_FINAL_ANSWER_BYTES}) beside the attempt's transcript, atomically, and returns its
 * reference. @param transcriptPath the attempt's transcript (`…/attempt-N.jsonl`) @param workspacesRoot what keys are relative to
 */
export async function keepFinalAnswer(text: string, transcriptPath: string, workspacesRoot: string): Promise<FinalAnswerRef> {
  const data = Buffer.from(text, 'utf8').subarray(0, MAX_FINAL_ANSWER_BYTES);
  const file = transcriptPath.replace(/\.jsonl$/, '.answer.md');
  await writeFileAtomic(file, data);
  return {
    key: path.relative(workspacesRoot, file).split(path.sep).join('/'),
    bytes: data.length,
    sha256: createHash('sha256').update(data).digest('hex'),
  };
}
