import { commitAll } from '../workspace/git.js';
import { NestedRepositoryError } from '../workspace/nested-repositories.js';
import type { RunWorkspace } from '../workspace/run-workspace.js';

/** Git's advice for a commit subject line. @unit characters */
const SUBJECT_LENGTH = 72;

/** The commit message of a stage: `<stage>: <first line of the summary>`, the whole summary, and where it came from. */
export function stageCommitMessage(stageId: string, summary: string, runId: string, attempt: number): string {
  const firstLine = summary.trim().split('\n')[0] || 'completed';
  const subject = `${stageId}: ${firstLine}`;
  const shortSubject = subject.length > SUBJECT_LENGTH ? `${subject.slice(0, SUBJECT_LENGTH - 1)}…` : subject;
  return `${shortSubject}\n\n${summary.trim()}\n\nAgent-Pipeline-Run: ${runId}\nAgent-Pipeline-Stage: ${stageId} (attempt ${attempt})\n`;
}

/**
 * Commits a completed stage's changes on the workspace's branch (the run's, or under `isolation: stage` the stage's
 * own). The stage's work is done and stays in the worktree, so a failed commit (a lock) is a warning, not a reason to
 * run the agent again.
 * @throws NestedRepositoryError when the worktree holds a git repository the agent made: that is the agent's doing,
 * and a commit without it would not be the stage's work, so the stage fails (see nested-repositories.ts)
 */
export async function commitStageChanges(
  workspace: RunWorkspace,
  message: string,
): Promise<{ commit?: string; warnings: string[]; failure?: string }> {
  if (!workspace.branch) {
    return { warnings: ['`commit: true` needs `workspace.repo` in the pipeline file; nothing was committed'] };
  }
  try {
    const commit = await commitAll(workspace.dir, message);
    return commit ? { commit, warnings: [] } : { warnings: [`the stage changed no files, so nothing was committed on ${workspace.branch}`] };
  } catch (err) {
    if (err instanceof NestedRepositoryError) throw err;
    const failure = `committing the stage's changes on ${workspace.branch} failed, they stay uncommitted in ${workspace.dir}: ${(err as Error).message.slice(0, 500)}`;
    return { warnings: [failure], failure };
  }
}

/** A commit message from the stage's `commitMessage` template, with the same trailers as the default one. */
export function customCommitMessage(rendered: string, runId: string, stageId: string, attempt: number): string {
  return `${rendered.trim()}\n\nAgent-Pipeline-Run: ${runId}\nAgent-Pipeline-Stage: ${stageId} (attempt ${attempt})\n`;
}
