import { REMOTE_NAME } from '../../pipeline/workspace-schema.js';
import { FALLBACK_IDENTITY, git, unmergedFiles } from '../workspace/git.js';
import { withLock } from '../workspace/keyed-lock.js';
import { shellWord } from '../../pipeline/shell-words.js';

/** How a push of the run's branch ended. */
export type PushOutcome =
  | { kind: 'pushed'; commit: string; rebased: boolean }
  /** The remote refused the push (it has commits the branch lacks) and no rebase was tried, or it refused again after one. */
  | { kind: 'rejected'; message: string }
  /** `git pull --rebase` stopped on conflicting changes; the rebase was aborted, the worktree is as it was. */
  | { kind: 'conflict'; files: string[]; message: string };

export interface PushOptions {
  /** The run's worktree, on `branch`. */
  dir: string;
  remote: string;
  branch: string;
  /** On a rejected push, pull with rebase once and push again. */
  rebaseOnce: boolean;
}

/** Thrown for a push that failed for another reason than a rejection: no such remote, authentication, network. */
export class PushError extends Error {
  override readonly name = 'PushError';
  constructor(
    message: string,
    readonly stderr: string,
  ) {
    super(message);
  }
}

/**
 * Pushes `branch` to `remote` with the worker's own git credentials, setting it as the upstream. A rejection
 * is an outcome, not an error: with `rebaseOnce`, the branch is rebased once onto the remote's and pushed again.
 * @throws PushError when git fails for another reason
 */
export async function pushBranch(options: PushOptions): Promise<PushOutcome> {
  await checkRemote(options.dir, options.remote);
  return withLock(options.dir, async () => {
    const first = await push(options);
    if (first.kind !== 'rejected' || !options.rebaseOnce) return first;
    const pulled = await git(options.dir, [...(await identityArgs(options.dir)), 'pull', '--rebase', '--no-autostash', '--', options.remote, options.branch], 'remote');
    if (pulled.failed) {
      const conflicting = await unmergedFiles(options.dir);
      await git(options.dir, ['rebase', '--abort']);
      if (conflicting.files.length === 0) throw new PushError(`git pull --rebase ${options.remote} ${options.branch} failed: ${firstLine(pulled.stderr)}`, pulled.stderr);
      return {
        kind: 'conflict',
        files: conflicting.files,
        message: `the push of ${options.branch} to ${options.remote} was rejected, and rebasing onto ${options.remote}/${options.branch} conflicts in ${conflicting.text}`,
      };
    }
    const second = await push(options);
    return second.kind === 'pushed' ? { ...second, rebased: true } : second;
  });
}

async function push(options: PushOptions): Promise<PushOutcome> {
  const ref = `refs/heads/${options.branch}`;
  const result = await git(options.dir, ['push', '--porcelain', '--set-upstream', '--', options.remote, `${ref}:${ref}`], 'remote');
  if (!result.failed) return { kind: 'pushed', commit: (await git(options.dir, ['rev-parse', ref])).stdout, rebased: false };
  // Porcelain output marks a refused ref with `!` and the reason in brackets: [rejected] (fetch first | non-fast-forward).
  const refused = result.stdout.split('\n').find((line) => line.startsWith('!') && line.includes('[rejected]'));
  if (refused) {
    return { kind: 'rejected', message: `the push of ${options.branch} to ${options.remote} was rejected: ${refused.split('\t').at(-1)?.trim()}; the remote branch has commits this run lacks` };
  }
  throw new PushError(`git push ${options.remote} ${options.branch} failed: ${firstLine(result.stderr || result.stdout)}`, result.stderr);
}

/**
 * Refuses a remote that is not the name of one configured in the repository: a URL, a path or an option would push
 * the run's branch somewhere the repository's owner never set up, or run a command (`--receive-pack=…`).
 * @throws RemoteNotConfiguredError naming the remote and the configured ones
 */
async function checkRemote(dir: string, remote: string): Promise<void> {
  const configured = (await git(dir, ['remote'])).stdout.split('\n').filter(Boolean);
  if (REMOTE_NAME.test(remote) && configured.includes(remote)) return;
  throw new RemoteNotConfiguredError(
    `workspace.push.remote ${JSON.stringify(remote)} is not a remote configured in the repository (configured: ${configured.join(', ') || 'none'}); add it with \`git remote add <name> <url>\` and name it here`,
  );
}

/** Thrown when `workspace.push.remote` is not the name of a remote the repository configures. */
export class RemoteNotConfiguredError extends Error {
  override readonly name = 'RemoteNotConfiguredError';
}

/** The repository's own identity when it has one; otherwise ours, so a rebase can write commits. */
async function identityArgs(dir: string): Promise<string[]> {
  return (await git(dir, ['config', 'user.email'])).failed ? FALLBACK_IDENTITY : [];
}

function firstLine(text: string): string {
  return text.split('\n').find((line) => line.trim() !== '')?.trim() ?? '(no output)';
}

/** Upper bound of `{{workspace.diff}}`: a review prompt, not a patch file. @unit characters */
export const MAX_DIFF_CHARS = 200_000;

/**
 * The committed changes of the worktree's branch since it left `base` (a ref of `repo`), for `{{workspace.diff}}`.
 * Cut at {@link MAX_DIFF_CHARS} with a note, so a huge change cannot blow up the prompt.
 */
export async function branchDiff(dir: string, repo: string, base: string): Promise<string> {
  const baseCommit = await git(repo, ['rev-parse', '--verify', '--quiet', '--end-of-options', `${base}^{commit}`]);
  if (baseCommit.failed) return '';
  // `A...B` diffs from their merge base, so commits the base gained since the run started do not show as removals.
  const diff = await git(dir, ['diff', '--no-color', `${baseCommit.stdout}...HEAD`]);
  if (diff.failed) return '';
  if (diff.stdout.length <= MAX_DIFF_CHARS) return diff.stdout;
  return `${diff.stdout.slice(0, MAX_DIFF_CHARS)}\n[… diff cut at ${MAX_DIFF_CHARS} characters of ${diff.stdout.length}; run \`git diff ${shellWord(`${base}...HEAD`)}\` in the worktree for all of it]\n`;
}
