import { ApplicationFailure } from '@temporalio/activity';
import { FORK_REFUSED } from '../../contracts/run-fork.js';
import { redactSecrets } from '../secrets.js';

/** A fork the worker refuses: nothing was laid out, nothing is retried; `fix` says what the person does instead. */
export function forkRefused(message: string, fix: string, details?: object): ApplicationFailure {
  return ApplicationFailure.create({ type: FORK_REFUSED, message: redactSecrets(`[${FORK_REFUSED}] ${message}; ${fix}`), nonRetryable: true, details: details ? [details] : undefined });
}
