import { createHash } from 'node:crypto';
import { readdir, realpath } from 'node:fs/promises';
import path from 'node:path';
import { stageFailure } from '../failures.js';
import { readRecord } from './own-files.js';
import { isInside } from '../../files/inside.js';
import { writeFileAtomic } from './run-workspace.js';
import { openWorkerSubfolder } from './worker-folder.js';

/*
 * Folders the worker has lent to runs (`workspace.dir`, `addDirs`), one record each in its own folder. An agent may
 * write anything in a folder it was lent, a git repository with a config of its choosing included: named afterwards
 * as a run's `workspace.repo` (the same setting, AGENT_PIPELINE_ALLOWED_PATHS, allows both), that config's smudge or
 * clean filter ran in the worker's own `git worktree add`, outside the sandbox, and read the worker's 0600 key in its
 * home. Git cannot be told to ignore a filter whose name it does not know, so a repository in a folder once lent is
 * never a run's repository: the worker refuses it before running any git there.
 */

/** Records `folder` (a real path) as lent to a run. */
export async function recordLentFolder(root: string, folder: string): Promise<void> {
  const dir = await openWorkerSubfolder(root, 'lent');
  const name = createHash('sha256').update(folder).digest('hex').slice(0, 32);
  await writeFileAtomic(path.join(dir, `${name}.json`), `${JSON.stringify({ folder })}\n`);
}

/** The folder once lent that holds `folder` (or is it), by real paths; `undefined` when none does. */
export async function lentFolderHolding(root: string, folder: string): Promise<string | undefined> {
  const dir = await openWorkerSubfolder(root, 'lent');
  const real = await realpath(folder).catch(() => path.resolve(folder));
  for (const name of await readdir(dir)) {
    const lent = (await readRecord<{ folder?: unknown }>(path.join(dir, name)))?.folder;
    if (typeof lent !== 'string') continue;
    if (isInside(lent, real)) return lent;
  }
  return undefined;
}

/** @throws CONFIG_INVALID when `repo` lies in a folder once lent to a run, naming both */
export async function refuseLentRepository(root: string, repo: string, stageId: string): Promise<void> {
  const lent = await lentFolderHolding(root, repo);
  if (lent === undefined) return;
  throw stageFailure({
    type: 'CONFIG_INVALID',
    stageId,
    message: `workspace.repo names ${repo}, which lies in ${lent}, a folder this worker lent to a run (workspace.dir or addDirs): its agents could write the repository's git config, whose filters the worker's own git would run`,
    hint: 'name a repository that no run was lent, or lend runs folders outside the repositories they use',
    details: { field: 'workspace.repo', path: repo, lent },
  });
}
