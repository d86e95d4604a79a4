#!/usr/bin/env node
// Records which workflow code the histories in this folder belong to (histories/manifest.json): the workflow code
// version and the fingerprint of the workflow's source. test/unit/workflow-fingerprint.test.ts compares it with the
// code. Run only through `npm run accept-workflow-change` (after the replay test passed) or `npm run record-histories`.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { workflowFingerprint } from '../../dist/dev/workflow-fingerprint.js';
import { WORKFLOW_CODE_VERSION } from '../../dist/workflows/code-version.js';

export const MANIFEST = fileURLToPath(new URL('./histories/manifest.json', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function writeManifest() {
  const { sha256, sdk, files } = workflowFingerprint(ROOT);
  writeFileSync(MANIFEST, `${JSON.stringify({ workflowCodeVersion: WORKFLOW_CODE_VERSION, workflowSourceSha256: sha256, sdk, files }, null, 2)}\n`);
  return MANIFEST;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(`wrote ${writeManifest()}`);
