import { existsSync } from 'node:fs';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { retryStageUpdate } from '../../src/contracts/messages.js';
import { git, initRepo } from '../helpers/git-repo.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { expectNoStageLeftRunning, stageOf, waitForState } from './workflow-helpers.js';

/*
 * `isolation: stage`: stages that run at the same time each work in their own worktree on their own branch and are
 * merged into the run's branch when they complete; a merge conflict waits for a person. Real claude (in the parallel
 * stages, which show what each saw in its worktree), real git.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
/** A stage that writes `file`, lists what it sees (to prove it does not see the other stage's file), and reports. */
const writer = (pipeline: string, stage: string, file: string, content: string): Rule => ({
  name: `${pipeline}-${stage}`,
  match: `Pipeline: ${pipeline} · Stage: ${stage} ·`,
  turns: [
    { text: `Writing ${file}.`, tool: { name: 'Bash', input: { command: `sleep 1; ls > seen-by-${stage}.txt; printf '${content}\\n' > ${file}`, description: 'write' } } },
    { text: report(`Wrote ${file}.`) },
  ],
});

/** A reviewer's report. */
const verdict = (kind: 'rework' | 'approve', feedback: string[]): string =>
  `\`\`\`json\n${JSON.stringify({ success: true, summary: kind, outputs: {}, verdict: kind, feedback })}\n\`\`\``;

let harness: Harness;
let base: string;
let repo: string;

const pipeline = (name: string, stages: string[]): string =>
  [
    `name: ${name}`,
    `workspace: { repo: ${repo} }`,
    'isolation: stage',
    'defaults: { backend: claude-cli, model: sonnet, retries: 0, heartbeatTimeout: 30s, permissionMode: dontAsk, allowedTools: [Bash, Read] }',
    'stages:',
    ...stages,
  ].join('\n');

beforeAll(async () => {
  harness = await createHarness('stage-isolation', {
    scenario: {
      rules: [
        writer('parallel', 'left', 'left.txt', 'left'),
        writer('parallel', 'right', 'right.txt', 'right'),
        {
          name: 'rework-review',
          match: 'Pipeline: rework · Stage: review ·',
          turns: [{ text: verdict('rework', ['F1: once more']) }, { text: verdict('approve', []) }],
        },
      ],
    },
  });
  base = await mkdtemp(path.join(tmpdir(), 'stage-isolation-'));
  repo = path.join(base, 'repo');
  await initRepo(repo, { 'README.md': '# Project\n' });
}, 60_000);
afterAll(async () => {
  await harness?.close();
  await rm(base, { recursive: true, force: true });
});

describe('isolation: stage', () => {
  // Generous: agents in git worktrees, with other test files at once on a loaded 2-core machine (its wait alone allows 120 s).
  it('runs parallel stages in their own worktrees and merges both into the run\'s branch', { timeout: 300_000 }, async () => {
    // The stage after them is a command: what it shows is what its worktree holds, not what an agent does (a `claude`
    // run spared).
    const yaml = pipeline('parallel', ['  - { id: left, prompt: Write left. }', '  - { id: right, prompt: Write right. }', '  - { id: after, needs: [left, right], run: "cat left.txt right.txt > both.txt && echo Joined." }']);
    const handle = await harness.start(await harness.writePipeline('parallel', yaml), {}, 'parallel-1');
    // Ended, or waiting for a person (a merge that could not be made): either way the state says why.
    const state = await waitForState(handle, (s) => s.status !== 'running', 240_000);
    expect(state.status, JSON.stringify({ error: state.error, stages: state.stages.map((s) => [s.id, s.status, s.error, s.waitingFor?.message]) })).toBe('completed');
    expectNoStageLeftRunning(state);
    const dir = harness.runDir('parallel-1');
    expect(state.workspace).toBe(dir);
    // Neither saw the other's file while it worked.
    expect(await git(dir, 'show', 'HEAD:seen-by-left.txt')).not.toContain('right.txt');
    expect(await git(dir, 'show', 'HEAD:seen-by-right.txt')).not.toContain('left.txt');
    // Both are on the run's branch, and the stage after them saw both.
    expect(await git(dir, 'show', 'HEAD:both.txt')).toBe('left\nright');
    expect(await git(dir, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('agent/parallel-1');
    const subjects = (await git(dir, 'log', '--format=%s', 'main..HEAD')).split('\n');
    // Whichever finished second was merged with a merge commit; the first was a fast-forward.
    expect(subjects.filter((s) => /^Merge stage (left|right) into agent\/parallel-1$/.test(s))).toHaveLength(1);
    expect(subjects.filter((s) => s.startsWith('left: ') || s.startsWith('right: ') || s.startsWith('after: '))).toHaveLength(3);
    expect(stageOf(state, 'left').result?.artifacts.map((a) => a.path)).toEqual(['left.txt', 'seen-by-left.txt']);
    expect(await git(dir, 'status', '--porcelain')).toBe('');
  });

  it('waits for a person when the second merge conflicts, and goes on after they merged it by hand', { timeout: 300_000 }, async () => {
    // The clash is the merges' (the same whichever stage wrote the file): two command stages write same.txt, no
    // `claude` runs. Their `sleep` keeps both at work together, as the writers' does, so each has its worktree before
    // the other merges.
    const clasher = (stage: string): string => `  - { id: ${stage}, run: "sleep 3; printf 'from ${stage}\\n' > same.txt" }`;
    const yaml = pipeline('clash', [clasher('one'), clasher('two')]);
    const handle = await harness.start(await harness.writePipeline('clash', yaml), {}, 'clash-1');
    const waiting = await waitForState(handle, (s) => s.stages.some((x) => x.waitingFor?.kind === 'failure'), 120_000);
    const stuck = waiting.stages.find((x) => x.waitingFor)!;
    const other = stuck.id === 'one' ? 'two' : 'one';
    expect(stuck.waitingFor!.message).toContain(`merging stage ${stuck.id}'s branch agent/clash-1--${stuck.id} into agent/clash-1 conflicts in same.txt`);
    expect(stuck.waitingFor!.commands).toEqual([`agent-pipeline retry clash-1 --stage ${stuck.id}`, `agent-pipeline skip clash-1 --stage ${stuck.id}`, 'agent-pipeline cancel clash-1']);
    const dir = harness.runDir('clash-1');
    // The run's branch holds the first stage's work only, and no half-done merge.
    expect(await git(dir, 'show', 'HEAD:same.txt')).toBe(`from ${other}`);
    expect(existsSync(path.join(dir, '.git')) && (await git(dir, 'status', '--porcelain'))).toBe('');
    // The person merges the stage's branch, keeping its version, and retries.
    await git(dir, 'merge', '--quiet', '--no-edit', '-X', 'theirs', `agent/clash-1--${stuck.id}`);
    await handle.executeUpdate(retryStageUpdate, { args: [{ stage: stuck.id }] });
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    expect(await git(dir, 'show', 'HEAD:same.txt')).toBe(`from ${stuck.id}`);
  });

  it("starts a review's rework round of a stage from the run's branch as it is then, with what completed since", { timeout: 300_000 }, async () => {
    // Commands, and the reviewer on the API backend: no `claude` runs. `other` lands on the run's branch after `fix`'s
    // first round; the second round reuses fix's worktree, brought up to the run's branch first.
    const yaml = pipeline('rework', [
      '  - { id: fix, run: "ls > fix-saw.txt; echo round >> fix.txt" }',
      '  - { id: other, needs: [fix], run: "echo other > other.txt" }',
      '  - { id: review, needs: [other], backend: anthropic-api, maxTokens: 500, prompt: Review the fix., review: { of: fix, maxRounds: 3, onMaxRounds: fail } }',
    ]);
    const handle = await harness.start(await harness.writePipeline('rework', yaml), {}, 'rework-1');
    const state = await waitForState(handle, (s) => s.status !== 'running', 120_000);
    expect(state.status, JSON.stringify(state.stages.map((s) => [s.id, s.status, s.round, s.error, s.waitingFor?.message]))).toBe('completed');
    expect(stageOf(state, 'fix').round).toBe(2);
    const dir = harness.runDir('rework-1');
    expect((await git(dir, 'show', 'HEAD:fix-saw.txt')).split('\n')).toContain('other.txt');
    expect(await git(dir, 'show', 'HEAD:fix.txt')).toBe('round\nround');
    expect(await git(dir, 'status', '--porcelain')).toBe('');
  });

  /**
   * Starts a run whose first stage, a command, writes work.txt and sleeps 3 s; once the file is there, the test holds
   * the stage worktree's index lock open, as a git still at work there would when the stage's commit comes.
   */
  async function startLocked(runId: string) {
    const yaml = pipeline(runId, [`  - { id: locker, run: "printf 'work\\n' > work.txt && sleep 3" }`, '  - { id: after, needs: [locker], run: "cat work.txt" }']);
    const handle = await harness.start(await harness.writePipeline(runId, yaml), {}, runId);
    const worktree = path.join(harness.runBookkeeping(runId), 'worktrees', 'locker');
    await vi.waitFor(() => expect(existsSync(path.join(worktree, 'work.txt'))).toBe(true), { timeout: 120_000, interval: 100 });
    const lockFile = path.resolve(worktree, await git(worktree, 'rev-parse', '--git-path', 'index.lock'));
    return { handle, worktree, lockFile, lock: await open(lockFile, 'wx') };
  }

  it('commits a stage\'s work once a git still at work in its worktree lets go of the index', { timeout: 300_000 }, async () => {
    const { handle, lockFile, lock } = await startLocked('briefly-1');
    // Let go after the command's end, within the commit's wait (10 s).
    await setTimeout(6_000);
    await lock.close();
    await rm(lockFile);
    const state = await waitForState(handle, (s) => s.status !== 'running', 120_000);
    expect(state.status, JSON.stringify(state.stages.map((s) => [s.id, s.status, s.error, s.waitingFor?.message]))).toBe('completed');
    expect(await git(harness.runDir('briefly-1'), 'show', 'HEAD:work.txt')).toBe('work');
  });

  it('waits for a person when a stage\'s work cannot be committed, rather than merging its branch without it', { timeout: 300_000 }, async () => {
    // The lock is held past the commit's wait: the commit fails. Merged anyway, the stage's branch would bring nothing,
    // and the stage after it would run without its file.
    const { handle, worktree, lockFile, lock } = await startLocked('locked-1');
    const waitsWith = (text: string) => waitForState(handle, (s) => stageOf(s, 'locker').waitingFor?.message.includes(text) ?? false, 120_000);
    let waiting = await waitsWith('index.lock');
    expect(stageOf(waiting, 'locker').waitingFor!.message).toContain("committing the stage's changes on agent/locked-1--locker failed, they stay uncommitted in");
    expect(stageOf(waiting, 'after').status).toBe('pending');
    // The person ends what held the lock but does not commit: the retry finds the work still off the branch.
    await lock.close();
    await rm(lockFile);
    await handle.executeUpdate(retryStageUpdate, { args: [{ stage: 'locker' }] });
    waiting = await waitsWith('holds work not committed');
    expect(stageOf(waiting, 'locker').waitingFor!.message).toContain(`worktree ${worktree} holds work not committed on its branch agent/locked-1--locker (work.txt)`);
    // Committed there, the retry merges it and the run goes on with the file.
    await git(worktree, 'add', '-A');
    await git(worktree, 'commit', '--quiet', '-m', 'locker: work');
    await handle.executeUpdate(retryStageUpdate, { args: [{ stage: 'locker' }] });
    const state = await harness.finish(handle);
    expect(state.status).toBe('completed');
    expect(await git(harness.runDir('locked-1'), 'show', 'HEAD:work.txt')).toBe('work');
  });
});
