import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeEndedMarker } from '../../src/activities/workspace/remove-workspace.js';
import { retryStageUpdate } from '../../src/contracts/messages.js';
import { cloneBare, git, initRepo } from '../helpers/git-repo.js';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';
import { parseJson, runCliMixed } from './cli-helpers.js';
import { expectNoStageLeftRunning, stageOf, waitForWaiting } from './workflow-helpers.js';

/*
 * Git delivery against a real bare repository as the remote: the run's branch is pushed after the last stage; a push
 * the remote rejects is rebased once and pushed again; a real conflict fails the run or waits for a person.
 * The stages run through the real SDK against the scripted model; git is the real git.
 */

const report = (summary: string): string => `Notes for the change.\n\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;

let base: string;
let repo: string;
let remote: string;
let harness: Harness;

/** Someone else pushes `file` with `content` to `branch` of the remote before the run does. */
async function pushFromElsewhere(branch: string, file: string, content: string): Promise<void> {
  const clone = await mkdtemp(path.join(base, 'elsewhere-'));
  await git(base, 'clone', '--quiet', remote, clone);
  await git(clone, 'checkout', '--quiet', '-b', branch);
  await mkdir(path.dirname(path.join(clone, file)), { recursive: true });
  await writeFile(path.join(clone, file), content);
  await git(clone, 'add', '.');
  await git(clone, 'commit', '--quiet', '-m', `someone else's ${file}`);
  await git(clone, 'push', '--quiet', 'origin', branch);
}

const pipeline = (name: string, workspace: string, extra = ''): string =>
  [
    `name: ${name}`,
    'inputs: { bead_id: { default: "7" }, title: { default: "Fix login / logout" } }',
    `workspace: ${workspace}`,
    extra,
    'defaults: { backend: anthropic-api, model: haiku, retries: 0, commitMessage: "Bead {{inputs.bead_id}}: {{inputs.title}}" }',
    'stages:',
    '  - { id: notes, prompt: Write the notes., commit: true }',
  ].join('\n');

beforeAll(async () => {
  harness = await createHarness('git-delivery', {
    scenario: {
      rules: [
        { match: 'Stage: notes ·', turns: [{ text: report('Wrote the notes.') }], repeatLastTurn: true },
        { match: 'Stage: review ·', turns: [{ text: report('Reviewed.') }], repeatLastTurn: true },
        { match: 'Stage: record ·', turns: [{ text: report('Recorded.') }], repeatLastTurn: true },
      ],
    },
  });
  base = await mkdtemp(path.join(tmpdir(), 'git-delivery-'));
  repo = path.join(base, 'repo');
  remote = path.join(base, 'remote.git');
  await initRepo(repo, { 'README.md': '# Widgets\n' });
  await cloneBare(repo, remote);
  // The remote is known by a GitHub address; git is told to use the bare repository for it, so pushes stay offline
  // while the compare URL is the one a person would open.
  await git(repo, 'remote', 'add', 'origin', 'https://github.com/acme/widgets.git');
  await git(repo, 'config', `url.${remote}.insteadOf`, 'https://github.com/acme/widgets.git');
}, 60_000);
afterAll(async () => {
  await harness?.close();
  await rm(base, { recursive: true, force: true });
});

describe('workspace.push to a bare remote', () => {
  it('pushes the run\'s branch, with a sanitised name and the templated commit message, and names the compare URL', async () => {
    const file = await harness.writePipeline('push-plain', pipeline('push-plain', `{ repo: ${repo}, branch: "beads-{{inputs.bead_id}}-{{inputs.title}}", push: { remote: origin }, pullRequest: { title: "Bead {{inputs.bead_id}}: {{inputs.title}}", base: main } }`));
    const state = await harness.finish(await harness.start(file, {}, 'push-plain-1'));
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    expect(stageOf(state, 'push').status).toBe('completed');
    const branch = 'beads-7-Fix-login-logout';
    expect(state.outputs).toMatchObject({ branch, commit: await git(remote, 'rev-parse', branch) });
    expect(await git(remote, 'log', '-1', '--format=%s', branch)).toBe('Bead 7: Fix login / logout');
    // gh is not installed here: a warning with the page where a person opens the pull request.
    expect(state.outputs?.compareUrl).toBe(`https://github.com/acme/widgets/compare/main...${branch}?expand=1`);
    expect(state.warnings?.join('\n')).toContain('no pull request was opened: `gh` is not installed on the worker');
  });

  it('rebases once when the remote branch moved on, and pushes both changes', async () => {
    await pushFromElsewhere('agent/push-rebase-1', 'docs/other.md', 'from elsewhere\n');
    const file = await harness.writePipeline('push-rebase', pipeline('push-rebase', `{ repo: ${repo}, push: { remote: origin, onConflict: rebase-once } }`));
    const state = await harness.finish(await harness.start(file, {}, 'push-rebase-1'));
    expect(state.status).toBe('completed');
    expect(state.warnings).toContain('the push of agent/push-rebase-1 was rejected; the branch was rebased onto origin/agent/push-rebase-1 once and pushed');
    const log = await git(remote, 'log', '--format=%s', 'agent/push-rebase-1');
    expect(log.split('\n').slice(0, 2)).toEqual(['Bead 7: Fix login / logout', "someone else's docs/other.md"]);
  });

  it('fails the run on a real conflict with rebase-once', async () => {
    await pushFromElsewhere('agent/push-conflict-1', 'outputs/notes.md', 'their notes\n');
    const file = await harness.writePipeline('push-conflict', pipeline('push-conflict', `{ repo: ${repo}, push: { remote: origin } }`));
    const state = await harness.finish(await harness.start(file, {}, 'push-conflict-1'));
    expect(state.status).toBe('failed');
    expect(state.error?.type).toBe('PUSH_CONFLICT');
    expect(state.error?.message).toContain('conflicts in outputs/notes.md');
    expect(stageOf(state, 'push').status).toBe('failed');
    // The worktree is left as it was, not in the middle of a rebase.
    expect(existsSync(path.join(harness.runDir('push-conflict-1'), '.git'))).toBe(true);
    expect(await git(harness.runDir('push-conflict-1'), 'status', '--porcelain')).toBe('');
  });

  it('waits for a person on a conflict with ask, and pushes after they resolved it and retried', async () => {
    await pushFromElsewhere('agent/push-ask-1', 'outputs/notes.md', 'their notes\n');
    const file = await harness.writePipeline('push-ask', pipeline('push-ask', `{ repo: ${repo}, push: { remote: origin, onConflict: ask }, keep: never }`));
    const handle = await harness.start(file, {}, 'push-ask-1');
    const waiting = await waitForWaiting(handle, 'push', 'failure');
    expect(waiting.status).toBe('waiting');
    const wait = stageOf(waiting, 'push').waitingFor!;
    expect(wait.message).toContain('conflicts in outputs/notes.md');
    expect(wait.commands).toEqual(['agent-pipeline retry push-ask-1 --stage push', 'agent-pipeline skip push-ask-1 --stage push', 'agent-pipeline cancel push-ask-1']);
    // The person resolves it in the worktree: rebase onto the remote, keeping the run's version of the file.
    const worktree = harness.runDir('push-ask-1');
    await git(worktree, 'pull', '--quiet', '--rebase', '-X', 'theirs', 'origin', 'agent/push-ask-1');
    await handle.executeUpdate(retryStageUpdate, { args: [{ stage: 'push' }] });
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    expect(await git(remote, 'show', 'agent/push-ask-1:outputs/notes.md')).toContain('Notes for the change.');
    // keep: never removed the worktree; the pushed branch stays in the repository.
    expect(existsSync(worktree)).toBe(false);
    expect(await git(repo, 'branch', '--list', 'agent/push-ask-1')).toContain('agent/push-ask-1');
    expect(await git(repo, 'worktree', 'list')).not.toContain('push-ask-1');
  });

  it('gives a reviewer the branch\'s diff against its base as {{workspace.diff}}', async () => {
    const yaml = [
      pipeline('diff', `{ repo: ${repo} }`),
      '  - { id: review, needs: [notes], prompt: "Review this change:\\n{{workspace.diff}}\\nEnd of diff on {{workspace.branch}}." }',
    ].join('\n');
    harness.modelServer.reset();
    const state = await harness.finish(await harness.start(await harness.writePipeline('diff', yaml), {}, 'diff-1'));
    expect(state.status).toBe('completed');
    const prompt = JSON.stringify(harness.modelServer.requests().find((r) => JSON.stringify(r.body).includes('Stage: review ·'))?.body);
    expect(prompt).toContain('diff --git a/outputs/notes.md b/outputs/notes.md');
    expect(prompt).toContain('+Notes for the change.');
    expect(prompt).toContain('End of diff on agent/diff-1.');
    // Only the run's own change: nothing of the base's history.
    expect(prompt).not.toContain('README.md');
  });

  it('keeps the workspace of a failed run with keep: onFailure', async () => {
    const yaml = pipeline('keep-failed', `{ repo: ${repo}, push: { remote: nowhere }, keep: onFailure }`);
    const state = await harness.finish(await harness.start(await harness.writePipeline('keep-failed', yaml), {}, 'keep-failed-1'));
    expect(state.status).toBe('failed');
    expect(state.error?.type).toBe('CONFIG_INVALID');
    expect(state.error?.message).toContain('workspace.push.remote "nowhere" is not a remote configured in the repository');
    expect(existsSync(path.join(harness.runDir('keep-failed-1'), 'outputs', 'notes.md'))).toBe(true);
  });

  it('prune removes the workspaces of runs that ended long enough ago, and keeps unpushed work', async () => {
    const root = harness.workspacesRoot;
    await mkdir(path.join(root, 'stray'));
    // The conflicted run's record says it ended ten days ago; its branch was never pushed and holds its commit.
    // Temporal knows it ended just now, so only --force (trust the records) removes it.
    await writeEndedMarker(harness.runBookkeeping('push-conflict-1'), { runId: 'push-conflict-1', status: 'failed', endedAt: Date.now() - 10 * 86_400_000, pushed: false });
    // The two commands that remove nothing in one process, one after the other; `prune --force` as a user runs it.
    const [none, kept, pruned] = await runCliMixed([['prune', '--older-than', '1d', '--json'], ['prune'], ['prune', '--force']], new Set([2]), harness.env);
    // Every run above has just ended (as Temporal knows): nothing is old enough.
    expect(none.exitCode).toBe(0);
    const listed = parseJson<{ runId: string; status: string; removed: boolean; warnings: string[] }[]>(none);
    expect(listed.filter((e) => e.removed)).toEqual([]);
    // Every run is looked up in Temporal, by the run id its bookkeeping records; a folder no record names is kept.
    expect(listed.find((e) => e.runId === 'push-plain-1')?.status).toBe('completed');
    expect(listed.find((e) => e.runId === 'stray')?.warnings[0]).toContain('no record names the run this folder belongs to; it is kept');

    expect(kept.stdout).toContain('kept  push-conflict-1 (failed, ended');
    expect(pruned.exitCode).toBe(0);
    expect(pruned.stdout).toContain('removed  push-conflict-1 (failed, ended');
    expect(pruned.stdout).toContain('kept  push-plain-1 (unknown');
    expect(pruned.stderr).toContain('branch agent/push-conflict-1 was kept: it has commits that are not merged or pushed anywhere');
    expect(existsSync(harness.runDir('push-conflict-1'))).toBe(false);
    expect(existsSync(harness.runDir('push-plain-1'))).toBe(true);
    expect(await git(repo, 'worktree', 'list')).not.toContain('push-conflict-1');
    expect(await git(repo, 'branch', '--list', 'agent/push-conflict-1')).toContain('agent/push-conflict-1');
  });
});

describe('workspace.pullRequest with gh installed and authenticated', () => {
  let withGh: Harness;
  let log: string;
  beforeAll(async () => {
    log = path.join(base, 'gh-args.txt');
    withGh = await createHarness('git-delivery-gh', {
      scenario: { rules: [{ match: 'Stage: notes ·', turns: [{ text: report('Wrote the notes.') }], repeatLastTurn: true }] },
      env: { PATH: `${path.join(PROJECT_ROOT, 'test', 'fixtures', 'gh')}${path.delimiter}${process.env.PATH}`, GH_FAKE_LOG: log },
    });
  });
  afterAll(async () => withGh?.close());

  it('opens the pull request with gh pr create, and its URL is a run output', async () => {
    const yaml = pipeline('pr', `{ repo: ${repo}, push: { remote: origin }, pullRequest: { title: "Bead {{inputs.bead_id}}: {{inputs.title}}", body: "{{stages.notes.summary}}", base: main, draft: true } }`);
    const state = await withGh.finish(await withGh.start(await withGh.writePipeline('pr', yaml), {}, 'pr-1'));
    expect(state.status).toBe('completed');
    expect(state.outputs?.pullRequestUrl).toBe('https://github.com/acme/widgets/pull/7');
    expect(state.warnings ?? []).toEqual([]);
    expect((await readFile(log, 'utf8')).split('\n')).toEqual([
      '--head=agent/pr-1', '--title=Bead 7: Fix login / logout', '--body=Wrote the notes.', '--base=main', '--draft', '',
    ]);
  });
});

describe('finally stages after the delivery', () => {
  /** The user prompt the model got for stage `record` of run `runId`. */
  const recordPrompt = (runId: string): string => {
    const request = harness.modelServer.requests().find((r) => r.path === '/v1/messages' && JSON.stringify(r.body).includes('Stage: record ·') && JSON.stringify(r.body).includes(runId));
    return JSON.stringify(request?.body ?? '');
  };
  // `extra` is skipped by its condition; a finally stage (which cannot have `needs`) still reads its status, and empty values.
  const withFinally = (name: string, workspace: string): string =>
    [
      pipeline(name, workspace),
      `  - { id: extra, needs: [notes], prompt: Extra., when: "{{inputs.bead_id}} == 'never'" }`,
      'finally:',
      '  - id: record',
      '    prompt: "Record {{run.id}}: {{run.status}} push={{run.delivery.push}} branch=[{{run.delivery.branch}}] url=[{{run.delivery.url}}] pr=[{{run.delivery.pullRequest}}] extra=[{{stages.extra.status}}|{{stages.extra.summary}}|{{stages.extra.outputs.note}}]"',
    ].join('\n');

  it('run after a push that conflicted, and see the run failed and the push with it', async () => {
    await pushFromElsewhere('agent/finally-conflict-1', 'outputs/notes.md', 'their notes\n');
    const file = await harness.writePipeline('finally-conflict', withFinally('finally-conflict', `{ repo: ${repo}, push: { remote: origin } }`));
    const state = await harness.finish(await harness.start(file, {}, 'finally-conflict-1'));
    expect(state.status).toBe('failed');
    expect(state.error?.type).toBe('PUSH_CONFLICT');
    expect(stageOf(state, 'record').status).toBe('completed');
    expect(stageOf(state, 'extra').status).toBe('skipped');
    expect(recordPrompt('finally-conflict-1')).toContain('Record finally-conflict-1: failed push=failed branch=[] url=[] pr=[] extra=[skipped||]');
  });

  it('run after a successful push, and see its branch and where to look at it', async () => {
    const file = await harness.writePipeline('finally-pushed', withFinally('finally-pushed', `{ repo: ${repo}, push: { remote: origin }, pullRequest: { title: "Bead", base: main } }`));
    const state = await harness.finish(await harness.start(file, {}, 'finally-pushed-1'));
    expect(state.status).toBe('completed');
    expect(stageOf(state, 'record').status).toBe('completed');
    const url = 'https://github.com/acme/widgets/compare/main...agent/finally-pushed-1?expand=1';
    expect(recordPrompt('finally-pushed-1')).toContain(`Record finally-pushed-1: completed push=pushed branch=[agent/finally-pushed-1] url=[${url}] pr=[] extra=[skipped||]`);
  });
});
