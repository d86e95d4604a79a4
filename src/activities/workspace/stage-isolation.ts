import { existsSync } from 'node:fs';
import path from 'node:path';
import { ensureWorktree, FALLBACK_IDENTITY, git, GitError, pinWorktree, uncommittedFiles, unmergedFiles } from './git.js';
import { withLock } from './keyed-lock.js';
import { removeStaleIndexLock } from './git-index-lock.js';
import { ensureRealDir } from './own-files.js';
import type { RunWorkspace } from './run-workspace.js';
import type { MergeOutcome } from '../../contracts/activities.js';
import { shellWord } from '../../pipeline/shell-words.js';

/**
 * `isolation: stage`: each stage works in its own worktree on its own branch (`<run branch>--<stage>`), made from
 * the run's branch as it is when the stage starts, and merged back into it when the stage completes. Stages that run
 * at the same time then never see each other's half-written files.
 */

/** The branch a stage works on under `isolation: stage`. */
export function stageBranchOf(runBranch: string, stageId: string): string {
  return `${runBranch}--${stageId}`;
}

/** The stage's own worktree: in the run's bookkeeping folder. */
function stageWorktreeDir(run: RunWorkspace, stageId: string): string {
  return path.join(run.bookkeeping, 'worktrees', stageId);
}

/**
 * Opens the stage's own worktree in the run's bookkeeping folder (outside the run's worktree, so neither git nor an
 * agent there sees it), so retries and later rounds reuse the same folder and the agent's session can resume there. A
 * worktree whose branch is already merged is first brought up to the run's branch, so a rework round starts from
 * everything completed since; a stale index lock in it is removed first, and `onWarning` hears of it.
 */
export async function openStageWorktree(run: RunWorkspace, repo: string, stageId: string, onWarning: (warning: string) => void = () => {}): Promise<RunWorkspace> {
  if (!run.branch) throw new Error('isolation: stage needs a git workspace');
  const branch = stageBranchOf(run.branch, stageId);
  await ensureRealDir(run.bookkeeping, 'worktrees');
  const dir = stageWorktreeDir(run, stageId);
  if (existsSync(path.join(dir, '.git'))) {
    await pinWorktree(dir, repo, stageId);
    // Before the fast-forward: a lock left by a git killed in an earlier round would fail it.
    const staleLock = await removeStaleIndexLock(dir);
    if (staleLock) onWarning(staleLock);
    const merged = !(await git(run.dir, ['merge-base', '--is-ancestor', '--', branch, run.branch])).failed;
    if (merged) await fastForward(dir, run.branch, stageId);
  } else {
    // Worktrees of one repository are added one at a time: parallel stages start together.
    await withLock(repo, () => ensureWorktree(dir, { repo, branch, base: run.branch }, stageId));
  }
  return { ...run, dir, branch, parent: run };
}

/**
 * Brings a merged stage's worktree up to the run's branch for its next round. A failure is the attempt's: a round
 * started from the stage's old work would redo, or undo, what completed since.
 * @throws GitError with git's words when the fast-forward fails (a change left in the worktree in the way, a lock)
 */
async function fastForward(dir: string, runBranch: string, stageId: string): Promise<void> {
  const forwarded = await git(dir, ['merge', '--ff-only', '--quiet', '--', runBranch]);
  if (!forwarded.failed) return;
  const output = forwarded.stderr || forwarded.stdout;
  throw new GitError(`stage ${stageId}'s worktree ${dir} could not be brought up to the run's branch ${runBranch} for its new round: ${output}; commit or undo what is in the way there, then retry`, output);
}

/**
 * Work the stage's worktree holds that is not committed on its branch (its commit failed, or a person changed files
 * there), as a conflict to report: merging the branch would leave it out of the run's branch and call the stage merged.
 * Undefined when there is none, or no worktree of the stage on this host.
 */
export async function uncommittedStageWork(run: RunWorkspace, repo: string, stageId: string): Promise<Extract<MergeOutcome, { kind: 'conflict' }> | undefined> {
  const dir = stageWorktreeDir(run, stageId);
  if (!existsSync(path.join(dir, '.git'))) return undefined;
  await pinWorktree(dir, repo, stageId);
  const uncommitted = await uncommittedFiles(dir);
  if (uncommitted.files.length === 0) return undefined;
  const branch = stageBranchOf(run.branch!, stageId);
  const message = `stage ${stageId}'s worktree ${dir} holds work not committed on its branch ${branch} (${uncommitted.text}); commit it there (git -C ${shellWord(dir)} add -A, then commit) before you retry`;
  return { kind: 'conflict', files: uncommitted.files, message };
}

/**
 * Merges the stage's branch into the run's branch, in the run's worktree (a fast-forward when nothing else landed
 * meanwhile). A conflict is aborted, leaving the run's branch as it was, and reported for a person to resolve.
 * @throws GitError when the merge failed without a conflict (local changes in the way, a lock), with git's message
 */
export async function mergeStageBranch(run: RunWorkspace, stageId: string): Promise<MergeOutcome> {
  const branch = stageBranchOf(run.branch!, stageId);
  return withLock(run.dir, async () => {
    const identity = (await git(run.dir, ['config', 'user.email'])).failed ? FALLBACK_IDENTITY : [];
    const merged = await git(run.dir, [...identity, 'merge', '--no-edit', '--quiet', '-m', `Merge stage ${stageId} into ${run.branch}`, '--', branch]);
    if (!merged.failed) return { kind: 'merged', commit: (await git(run.dir, ['rev-parse', 'HEAD'])).stdout };
    const conflicting = await unmergedFiles(run.dir);
    await git(run.dir, ['merge', '--abort']);
    if (conflicting.files.length === 0) throw new GitError(`git merge ${branch} into ${run.branch} failed: ${merged.stderr || merged.stdout}`, merged.stderr || merged.stdout);
    return {
      kind: 'conflict',
      files: conflicting.files,
      message: `merging stage ${stageId}'s branch ${branch} into ${run.branch} conflicts in ${conflicting.text}`,
    };
  });
}
