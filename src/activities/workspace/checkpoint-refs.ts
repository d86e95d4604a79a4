import { createHash } from 'node:crypto';
import { git } from './git.js';

/*
 * The hidden refs that keep a run's checkpoint commits (checkpoint/git-snapshot.ts) in its repository: one namespace
 * per run folder, outside refs/heads and refs/tags, so no branch list, push or fetch shows them. `prune` deletes them
 * with the run's worktree.
 */

/** Where the worker keeps the hidden checkpoint refs of the run whose folder is named `runFolderName`. */
export function hiddenRefPrefix(runFolderName: string): string {
  return `refs/agent-pipeline/checkpoints/${createHash('sha256').update(runFolderName).digest('hex').slice(0, 16)}/`;
}

/** Deletes the hidden refs under `prefix` in the repository of `cwd` (but `keep`); returns how many. */
export async function deleteHiddenRefs(cwd: string, prefix: string, keep?: string): Promise<number> {
  const refs = (await listHiddenRefs(cwd, prefix)).filter((ref) => ref !== keep);
  for (const ref of refs) await git(cwd, ['update-ref', '-d', '--', ref]);
  return refs.length;
}

/** The hidden refs under `prefix` in the repository of `cwd` (none when git cannot list them). */
export async function listHiddenRefs(cwd: string, prefix: string): Promise<string[]> {
  const listed = await git(cwd, ['for-each-ref', '--format=%(refname)', '--', prefix]);
  return listed.failed ? [] : listed.stdout.split('\n').filter((ref) => ref.startsWith(prefix));
}
