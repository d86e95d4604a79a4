import { DefaultFailureConverter } from '@temporalio/common';

/*
 * The failure converter of workers that encrypt (loaded by path: Temporal bundles it into the workflow code and
 * requires it on the worker's main thread). A failure's message and stack trace move into `encodedAttributes`, a
 * payload, so the payload codec encrypts them like any other payload; the history shows "Encoded failure". Failure
 * types (`CLI_CRASHED`, `RUN_NOT_TRUSTED`) and the retry state stay readable. Workflow code: imports nothing else.
 */
export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
