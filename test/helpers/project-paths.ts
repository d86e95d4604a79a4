import path from 'node:path';
import { fileURLToPath } from 'node:url';

/*
 * Where the project and its built workflow bundles are. Kept apart from harness.ts, which loads the whole worker
 * (the Temporal SDK, the sandbox checks): a test that only needs a path does not pay for that import (issue 32).
 */

export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** `npm test` builds first, so integration tests load the same workflow bundle a user's worker does. */
export const WORKFLOW_BUNDLE = path.join(PROJECT_ROOT, 'dist', 'workflow-bundle.js');
/** The same, built with the converters of encrypting workers. */
export const ENCRYPTED_WORKFLOW_BUNDLE = path.join(PROJECT_ROOT, 'dist', 'workflow-bundle-encrypted.js');
