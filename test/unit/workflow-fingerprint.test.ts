import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { workflowFingerprint } from '../../src/dev/workflow-fingerprint.js';
import { WORKFLOW_CODE_VERSION } from '../../src/workflows/code-version.js';
import { PROJECT_ROOT, WORKFLOW_BUNDLE } from '../helpers/project-paths.js';

/*
 * The recorded replay histories belong to one version of the workflow code (test/replay/histories/manifest.json).
 * Changing the workflow's source moves its fingerprint, and this test fails until the change is accounted for:
 * - it keeps runs in flight working: `npm run accept-workflow-change` replays the histories and, only if they pass,
 *   records the new fingerprint under the same version;
 * - it breaks them: bump WORKFLOW_CODE_VERSION (src/workflows/code-version.ts; it is part of the default build id, so
 *   pinned runs stay on old workers) and `npm run record-histories`, which refuses to record over histories that no
 *   longer replay while the version is unchanged.
 */

interface Manifest {
  workflowCodeVersion: number;
  workflowSourceSha256: string;
  sdk: string;
  files: Record<string, string>;
}

const manifest = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'test', 'replay', 'histories', 'manifest.json'), 'utf8')) as Manifest;

describe('workflow code and recorded histories', () => {
  test('the histories were recorded for the current workflow code version', () => {
    expect(
      manifest.workflowCodeVersion,
      `WORKFLOW_CODE_VERSION is ${WORKFLOW_CODE_VERSION} but the histories were recorded for ${manifest.workflowCodeVersion}: run \`npm run record-histories\``,
    ).toBe(WORKFLOW_CODE_VERSION);
  });

  test('the workflow source is the one the histories were recorded or last accepted for', () => {
    const current = workflowFingerprint(PROJECT_ROOT);
    const changed = [...new Set([...Object.keys(current.files), ...Object.keys(manifest.files)])].filter((f) => current.files[f] !== manifest.files[f]);
    expect(
      { sdk: current.sdk, changed },
      'The workflow code changed since the replay histories were recorded. If the change keeps runs in flight working, run ' +
        '`npm run accept-workflow-change` (it replays the histories first). If it breaks them, bump WORKFLOW_CODE_VERSION in ' +
        'src/workflows/code-version.ts and run `npm run record-histories`.',
    ).toEqual({ sdk: manifest.sdk, changed: [] });
    expect(current.sha256).toBe(manifest.workflowSourceSha256);
  });

  test('the fingerprint covers exactly the modules the workflow bundle holds', () => {
    if (!existsSync(WORKFLOW_BUNDLE)) throw new Error(`run \`npm run build\` first: ${WORKFLOW_BUNDLE} is missing`);
    const bundled = new Set([...readFileSync(WORKFLOW_BUNDLE, 'utf8').matchAll(/\.\/dist\/((?:workflows|pipeline|contracts)\/[a-z0-9/-]+|failure-types)\.js/g)].map((m) => `src/${m[1]}.ts`));
    expect(Object.keys(workflowFingerprint(PROJECT_ROOT).files).sort()).toEqual([...bundled].sort());
  });

  test('a change to a workflow module moves the fingerprint; a change to a type-only import does not', async () => {
    const copy = await mkdtemp(path.join(tmpdir(), 'fingerprint-'));
    try {
      await cp(path.join(PROJECT_ROOT, 'src'), path.join(copy, 'src'), { recursive: true });
      await cp(path.join(PROJECT_ROOT, 'package.json'), path.join(copy, 'package.json'));
      const before = workflowFingerprint(copy).sha256;
      expect(before).toBe(workflowFingerprint(PROJECT_ROOT).sha256);
      const activity = path.join(copy, 'src', 'activities', 'run-stage.ts');
      await writeFile(activity, `${await readFile(activity, 'utf8')}\n// activity-only change\n`);
      expect(workflowFingerprint(copy).sha256).toBe(before);
      const graph = path.join(copy, 'src', 'pipeline', 'graph.ts');
      await writeFile(graph, `${await readFile(graph, 'utf8')}\nexport const CHANGED = 1;\n`);
      expect(workflowFingerprint(copy).sha256).not.toBe(before);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });
});
