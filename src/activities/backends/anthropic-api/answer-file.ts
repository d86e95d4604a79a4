import { withoutReportBlock } from '../../../pipeline/contract.js';
import { redactSecrets } from '../../secrets.js';
import { stageFailure } from '../../failures.js';
import { writeFileInside, WriteOutsideError } from '../../workspace/run-workspace.js';
import type { BackendRequest } from '../stage-backend.js';

/*
 * An API stage's answer file (`output:`) holds the model's own answer: what the person asked the stage for. The report
 * block is bookkeeping for the pipeline (it stays in the transcript and the stage result), and a reply that only
 * reports (the contract retry asks for nothing else) must never replace the answer written before it.
 */

export interface AnswerFileWrite {
  request: Pick<BackendRequest, 'workspace' | 'claimFile' | 'continuation' | 'stage'>;
  /** Where the answer lands. @format workspace-relative path */
  relativePath: string;
  /** The model's whole answer, report block included. */
  answer: string;
  /** `none`: the answer has no report block, so all of it goes to the file (a closing JSON block included). */
  contract?: 'json' | 'none';
}

/**
 * Writes `answer` without its report block to `relativePath` (atomically, secrets redacted) and returns true; or
 * leaves the file as it is and returns false when the reply only reports: a contract retry, or an
 * answer with nothing besides the report.
 */
export async function writeAnswerFile({ request, relativePath, answer, contract = 'json' }: AnswerFileWrite): Promise<boolean> {
  const body = contract === 'none' ? answer : withoutReportBlock(answer);
  if ((contract !== 'none' && request.continuation?.kind === 'retry') || body.trim() === '') return false;
  request.claimFile(relativePath);
  // A model that echoes a key (it saw one in a file) must not write it into the workspace.
  try {
    await writeFileInside(request.workspace.dir, relativePath, redactSecrets(body));
  } catch (err) {
    if (!(err instanceof WriteOutsideError)) throw err;
    throw stageFailure({ type: 'CONFIG_INVALID', stageId: request.stage.id, message: `cannot write the answer file: ${err.message}`, details: { path: relativePath } });
  }
  return true;
}
