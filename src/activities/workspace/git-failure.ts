import type { ApplicationFailure } from '@temporalio/common';
import { stageFailure } from '../failures.js';
import type { GitError } from './git.js';

/** A git failure as the catalogue's GIT_FAILED, with git's own message (not an internal error to report). */
export function gitFailure(err: GitError, stageId: string): ApplicationFailure {
  return stageFailure({ type: 'GIT_FAILED', stageId, message: err.message.trim().slice(0, 1_000), details: { output: err.output.slice(-2_000) } });
}
