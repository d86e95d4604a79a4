import { createHash } from 'node:crypto';

/**
 * A bundle's hash, on the client that makes it (`create-run-bundle.ts`) and the worker that checks it
 * (`activities/prompt/run-bundle-files.ts`): sorted `path → content hash` pairs and `pipelineDir`.
 */
export function hashManifest(pipelineDir: string, files: Record<string, string>): string {
  const entries = Object.keys(files).sort().map((key) => [key, files[key]]);
  return createHash('sha256').update(JSON.stringify({ pipelineDir, files: entries })).digest('hex');
}
