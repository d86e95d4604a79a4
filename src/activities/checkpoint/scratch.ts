import { randomUUID } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { openWorkerSubfolder } from '../workspace/worker-folder.js';

/**
 * Runs `fn` with a fresh folder in the worker's own scratch folder (`<root>/.agent-pipeline/scratch/`), removed
 * afterwards. Inside the workspaces root, so restored folders move into place by rename and nothing is removed outside it.
 */
export async function withScratch<T>(root: string, fn: (scratch: string) => Promise<T>): Promise<T> {
  const scratch = path.join(await openWorkerSubfolder(root, 'scratch'), randomUUID());
  await mkdir(scratch);
  try {
    return await fn(scratch);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
