import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * A hash of the source of everything the workflow bundle runs: the modules reachable from `src/workflows/index.ts`
 * through runtime imports (`import type` is erased, so it is not followed), plus the pinned `@temporalio/workflow`
 * version. The replay histories in test/replay are recorded against one fingerprint (their `manifest.json`); see
 * `src/workflows/code-version.ts` for what a change must do to move it.
 */
export interface WorkflowFingerprint {
  sha256: string;
  /** The `@temporalio/workflow` version pinned in package.json. */
  sdk: string;
  /** Each source file hashed (relative to the project root, sorted) → sha256 of its content. */
  files: Record<string, string>;
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s+(type\s+)?(?:[^'";]*?\sfrom\s+)?'(\.{1,2}\/[^']+)'/g;

export function workflowFingerprint(projectRoot: string): WorkflowFingerprint {
  const entry = path.join(projectRoot, 'src', 'workflows', 'index.ts');
  const seen = new Set<string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const match of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      if (match[1]) continue;
      queue.push(path.resolve(path.dirname(file), match[2].replace(/\.js$/, '.ts')));
    }
  }
  const pkg = JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  const sdk = pkg.dependencies['@temporalio/workflow'];
  const files: Record<string, string> = {};
  for (const file of [...seen].sort()) {
    files[path.relative(projectRoot, file).split(path.sep).join('/')] = createHash('sha256').update(readFileSync(file)).digest('hex');
  }
  const sha256 = createHash('sha256').update(JSON.stringify({ sdk, files: Object.entries(files).sort() })).digest('hex');
  return { sha256, sdk, files };
}
