/**
 * The version of the workflow's behaviour: bump it when a change would break runs already in flight (the recorded
 * histories in test/replay no longer replay and must be recorded again). It is part of every worker's default build
 * id, so with Worker Deployment Versioning a bump is always a new build and old runs stay pinned to old workers.
 * `test/unit/workflow-fingerprint.test.ts` fails when the workflow code changed without either proof of
 * compatibility (`npm run accept-workflow-change`, which replays the histories) or a bump and new histories
 * (`npm run record-histories`). Not imported by workflow code, so it is not part of what it fingerprints.
 */
export const WORKFLOW_CODE_VERSION = 1;
