import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRunWorkspace } from '../../src/activities/workspace/run-workspace.js';
import { toFolderName } from '../../src/activities/workspace/run-folder.js';
import { startModelServer, type ModelServer } from '../../src/dev/model-server.js';
import { git, initRepo } from '../helpers/git-repo.js';
import { activitiesFor, failureOf, stageInput, startAttempt } from '../helpers/stage-attempt.js';

const REPORT = (summary: string): string => `Done.\n\`\`\`json\n{"success": true, "summary": "${summary}", "outputs": {}}\n\`\`\``;

let server: ModelServer;
let base: string;
let repo: string;
let root: string;

const pipeline = (extra: string, commit = true): string =>
  [
    'name: git-pipeline',
    extra,
    'stages:',
    '  - id: notes',
    '    backend: anthropic-api',
    '    model: haiku',
    `    commit: ${commit}`,
    '    prompt: Write notes.',
  ].join('\n');

beforeAll(async () => {
  server = await startModelServer({
    scenario: { rules: [{ match: 'Stage: notes ·', turns: [{ text: REPORT('Wrote the notes.\\nIn one file.') }], repeatLastTurn: true }] },
    log: () => {},
  });
  base = await mkdtemp(path.join(tmpdir(), 'workspace-git-'));
  repo = path.join(base, 'repo');
  root = path.join(base, 'workspaces');
  await initRepo(repo, { 'README.md': '# Project\n' });
});
afterAll(async () => {
  await server?.close();
  await rm(base, { recursive: true, force: true });
});

function attemptOf(yaml: string, runId: string, attempt = 1, round = 1) {
  const activities = activitiesFor({ workspacesRoot: root, baseURL: server.url, apiKey: 'sk-test-git-key-123' });
  return startAttempt(activities, stageInput(yaml, 'notes', { baseDir: base, runId, round }), { attempt }).result;
}

describe('a run workspace on a git repository', () => {
  it('is a worktree on the run\'s branch, where a `commit: true` stage commits its changes with its summary', async () => {
    const result = await attemptOf(pipeline('workspace: { repo: repo }'), 'run-a');
    const dir = path.join(root, toFolderName('run-a'));
    expect(result.workspace).toBe(dir);
    expect(await git(dir, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('agent/run-a');
    expect(result.commit).toBe(await git(dir, 'rev-parse', 'HEAD'));
    expect(await git(dir, 'log', '-1', '--format=%B')).toBe(
      'notes: Wrote the notes.\n\nWrote the notes.\nIn one file.\n\nAgent-Pipeline-Run: run-a\nAgent-Pipeline-Stage: notes (attempt 1)\n',
    );
    // Only the stage's work is committed: never the bookkeeping folder.
    expect((await git(dir, 'show', '--name-only', '--format=', 'HEAD')).split('\n')).toEqual(['outputs/notes.md']);
    expect(await git(dir, 'status', '--porcelain')).toBe('');
    // The repository's own checkout is untouched.
    expect(await git(repo, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('main');
    expect(existsSync(path.join(repo, 'outputs'))).toBe(false);
  });

  it('is reused by every retry and by stages that open it at the same time', async () => {
    const settings = { repo, branch: 'agent/run-b' };
    const opened = await Promise.all([1, 2, 3].map(() => openRunWorkspace(root, { runId: 'run-b' }, { git: settings, stageId: 's' })));
    expect(new Set(opened.map((w) => w.dir)).size).toBe(1);
    await writeFile(path.join(opened[0].dir, 'work.txt'), 'partial work');
    const again = await openRunWorkspace(root, { runId: 'run-b' }, { git: settings, stageId: 's' });
    expect(await readFile(path.join(again.dir, 'work.txt'), 'utf8')).toBe('partial work');
    expect(await git(again.dir, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('agent/run-b');
  });

  it('of a run started again under the id of one that ended is a worktree of its own: the branch the earlier one holds is refused, saying what to do', async () => {
    const earlier = await openRunWorkspace(root, { runId: 'run-again', firstExecutionRunId: 'first-run' }, { git: { repo, branch: 'agent/run-again' }, stageId: 's' });
    await writeFile(path.join(earlier.dir, 'work.txt'), "the earlier run's");
    const later = { runId: 'run-again', firstExecutionRunId: 'second-run' };
    await expect(openRunWorkspace(root, later, { git: { repo, branch: 'agent/run-again' }, stageId: 's' })).rejects.toThrow(
      /\[WORKSPACE_ERROR\].*already (checked out|used by worktree).*an earlier run under the same id keeps its worktree on the branch: remove it with `agent-pipeline prune --older-than 0s`, or start with another id or workspace\.branch/,
    );
    // On a branch of its own it works apart, and the earlier run's work stays where it was.
    const apart = await openRunWorkspace(root, later, { git: { repo, branch: 'agent/run-again-2' }, stageId: 's' });
    expect(apart.dir).not.toBe(earlier.dir);
    expect(existsSync(path.join(apart.dir, 'work.txt'))).toBe(false);
    expect(await readFile(path.join(earlier.dir, 'work.txt'), 'utf8')).toBe("the earlier run's");
  });

  it('renders the branch template and notes a stage that changed nothing', async () => {
    const yaml = pipeline('workspace: { repo: repo, branch: "pipelines/{{run.pipeline}}/{{run.id}}" }');
    const first = await attemptOf(yaml, 'run-c');
    expect(first.commit).toBeDefined();
    const second = await attemptOf(yaml, 'run-c', 1, 2);
    expect(second.commit).toBeUndefined();
    expect(second.warnings).toContain('the stage changed no files, so nothing was committed on pipelines/git-pipeline/run-c');
    expect(await git(repo, 'branch', '--list', 'pipelines/*')).toContain('pipelines/git-pipeline/run-c');
  });

  it('sanitises a branch name git would refuse, and fails for good with a folder that is not a repository', async () => {
    const sanitised = await attemptOf(pipeline('workspace: { repo: repo, branch: "bad..name/{{run.id}} x" }'), 'run-d');
    expect(await git(sanitised.workspace, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('bad-name/run-d-x');

    await mkdir(path.join(base, 'plain'), { recursive: true });
    const notRepo = await failureOf(attemptOf(pipeline('workspace: { repo: plain }'), 'run-e'));
    expect(notRepo).toMatchObject({ type: 'CONFIG_INVALID', nonRetryable: true });
    expect(notRepo.message).toContain(`workspace.repo ${path.join(base, 'plain')} is not a git repository`);
  });

  it('warns instead of committing when the pipeline has no repository', async () => {
    const result = await attemptOf(pipeline(''), 'run-f');
    expect(result.commit).toBeUndefined();
    expect(result.warnings).toContain('`commit: true` needs `workspace.repo` in the pipeline file; nothing was committed');
  });
});

/** A run under `isolation: stage` whose stage `edit` wrote notes.md in its own worktree, committed and merged: its first round. */
async function mergedFirstRound(runId: string) {
  const { mergeStageBranch, openStageWorktree } = await import('../../src/activities/workspace/stage-isolation.js');
  const { openPipelineWorkspace } = await import('../../src/activities/workspace/open-workspace.js');
  const context = { inputs: {}, stages: {}, run: { id: runId, pipeline: 'git-pipeline' }, attempt: 1 };
  const run = await openPipelineWorkspace({ root, runId, baseDir: base, settings: { repo }, context, stageId: 'edit' });
  const stage = await openStageWorktree(run, repo, 'edit');
  await writeFile(path.join(stage.dir, 'notes.md'), 'first round\n');
  await git(stage.dir, 'add', 'notes.md');
  await git(stage.dir, 'commit', '--quiet', '-m', 'the first round');
  expect((await mergeStageBranch(run, 'edit')).kind).toBe('merged');
  return { run, stage };
}

describe('a git failure that is not a conflict', () => {
  it('fails as GIT_FAILED with git\'s own message, not as an internal error to report', async () => {
    const { MockActivityEnvironment } = await import('@temporalio/testing');
    const { createMergeStage } = await import('../../src/activities/merge-stage.js');
    const { openStageWorktree } = await import('../../src/activities/workspace/stage-isolation.js');
    const { openPipelineWorkspace } = await import('../../src/activities/workspace/open-workspace.js');
    const settings = { repo };
    const context = { inputs: {}, stages: {}, run: { id: 'merge-blocked', pipeline: 'git-pipeline' }, attempt: 1 };
    const run = await openPipelineWorkspace({ root, runId: 'merge-blocked', baseDir: base, settings, context, stageId: 'edit' });
    // The stage changed README.md on its branch; the run's worktree has an uncommitted change to it in the way.
    const stage = await openStageWorktree(run, repo, 'edit');
    await writeFile(path.join(stage.dir, 'README.md'), '# Project, edited by the stage\n');
    await git(stage.dir, 'commit', '--quiet', '-am', 'the stage edits the README');
    await writeFile(path.join(run.dir, 'README.md'), '# Project, edited by hand\n');
    const merge = createMergeStage({ workspacesRoot: root });
    const input = { runId: 'merge-blocked', pipelineName: 'git-pipeline', baseDir: base, inputs: {}, workspace: settings, stageId: 'edit' };
    const failure = await failureOf(new MockActivityEnvironment().run(merge, input));
    expect(failure.type).toBe('GIT_FAILED');
    expect(failure.message).toMatch(/^\[GIT_FAILED\] stage edit: git merge agent\/merge-blocked--edit into agent\/merge-blocked failed: .*README\.md/s);
    expect(failure.message).toContain('would be overwritten by merge');
    expect(failure.message).not.toContain('please report');
  });

  it("a merged stage's worktree that cannot be brought up to the run's branch for its next round fails naming it, rather than starting from the stage's old work", async () => {
    const { openStageWorktree } = await import('../../src/activities/workspace/stage-isolation.js');
    const { GitError } = await import('../../src/activities/workspace/git.js');
    const { run, stage } = await mergedFirstRound('rework-blocked');
    // A later stage changes the notes on the run's branch; a change left in the stage's worktree is in the way.
    await writeFile(path.join(run.dir, 'notes.md'), 'a later stage\n');
    await git(run.dir, 'commit', '--quiet', '-am', 'a later stage');
    await writeFile(path.join(stage.dir, 'notes.md'), 'left behind\n');

    const refused = await openStageWorktree(run, repo, 'edit').catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(GitError);
    expect(String(refused)).toMatch(/stage edit's worktree .* could not be brought up to the run's branch agent\/rework-blocked for its new round: .*notes\.md/s);
    expect(String(refused)).toContain('commit or undo what is in the way there, then retry');

    await git(stage.dir, 'checkout', '--', 'notes.md');
    const reopened = await openStageWorktree(run, repo, 'edit');
    expect(await readFile(path.join(reopened.dir, 'notes.md'), 'utf8')).toBe('a later stage\n');
    expect(await git(reopened.dir, 'rev-parse', 'HEAD')).toBe(await git(run.dir, 'rev-parse', 'HEAD'));
  });

  it("a stale index lock in a merged stage's worktree (a git killed in its last round) is removed before the bring-up, and said", async () => {
    const { openStageWorktree } = await import('../../src/activities/workspace/stage-isolation.js');
    const { indexLockPath } = await import('../../src/activities/workspace/git-index-lock.js');
    const { run, stage } = await mergedFirstRound('rework-locked');
    await writeFile(path.join(run.dir, 'later.md'), 'a later stage\n');
    await git(run.dir, 'add', 'later.md');
    await git(run.dir, 'commit', '--quiet', '-m', 'a later stage');
    const lock = (await indexLockPath(stage.dir)) as string;
    await writeFile(lock, '');

    const warnings: string[] = [];
    const reopened = await openStageWorktree(run, repo, 'edit', (warning) => warnings.push(warning));
    expect(warnings).toEqual([`removed a stale ${lock} that no process held (left by a git command that was killed); git works again in the workspace`]);
    expect(existsSync(lock)).toBe(false);
    expect(await readFile(path.join(reopened.dir, 'later.md'), 'utf8')).toBe('a later stage\n');
    expect(await git(reopened.dir, 'rev-parse', 'HEAD')).toBe(await git(run.dir, 'rev-parse', 'HEAD'));
  });
});
