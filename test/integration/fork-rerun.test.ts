import { mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunState } from '../../src/pipeline/run-state.js';
import { generateEncryptionKey } from '../../src/trust/keys.js';
import { checkpointsPrefix } from '../../src/activities/checkpoint/keys.js';
import { findStageStartCheckpoint } from '../../src/activities/checkpoint/stage-start.js';
import { openStore } from '../../src/store/open-store.js';
import { cloneBare, git, initRepo } from '../helpers/git-repo.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { parseJson, runCli, runCliCommands } from './cli-helpers.js';
import { prepareRunInput } from '../../src/library/pipeline-source.js';
import { startRun } from '../../src/library/runs.js';
import { definePipeline, PipelineClient } from '../../src/library/index.js';
import { calls, RULES, runToEnd } from './fork-helpers.js';

/*
 * Forks without an agent to watch (docs/forking.md): `rerun` of a failed run does not run its completed stages again; a
 * fork from one of two parallel stages takes over only what had completed when it started; a fork of a git run starts
 * its own branch where the source's was, with the uncommitted work uncommitted, and pushes it; a fork of a run with
 * encrypted history reads its source and stays encrypted. fork-run.test.ts has the fork with the real `claude`.
 * The source runs start in process (runToEnd); the commands under test run as a user runs them (runCli), or back to
 * back in one process through the CLI's entry (runCliCommands) where one of their kind already runs as a user does.
 */

/** The harness (its in-process worker, model server, replay check) of every test but the encrypted fork's. */
let harness: Harness;
beforeAll(async () => {
  harness = await createHarness('fork-rerun', { scenario: { rules: RULES } });
});
afterAll(async () => {
  await harness?.close();
});

describe('rerun and forks of other runs', () => {

  test('rerun of a run that failed at its second stage, once the file is fixed, does not run the first again', { timeout: 300_000 }, async () => {
    const yaml = (second: string) =>
      ['name: flaky', 'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }', 'stages:', '  - { id: first, prompt: Do the first part. }', `  - { id: second, prompt: ${second}, needs: [first] }`, ''].join('\n');
    const file = await harness.writePipeline('flaky', yaml('Do the second part.'));
    expect((await runToEnd(harness, file, 'flaky-source')).status).toBe('failed');
    expect(calls(harness, 'flaky-first')).toBe(1);

    await writeFile(file, yaml('Do the second part with care.'));
    // The rerun, a fork of it, and what is read and refused after, back to back in one process; the moved file's
    // refusal below runs as a user runs it.
    const [rerun, again, logs, fromTaken, reused, gone] = await runCliCommands(
      [
        ['rerun', 'flaky-source', '--id', 'flaky-rerun', '--wait', '--json'],
        // A fork of the rerun takes `first` over again, its cost still carried (not the $0 the rerun spent on it).
        ['fork', 'flaky-rerun', '--from', 'second', file, '--id', 'flaky-rerun-fork', '--wait', '--json'],
        // The fork of the fork ran `first` in neither run: its transcript is the source's, said so; and a fork from it
        // is one of the source, which alone holds the workspace of its start.
        ['logs', 'flaky-rerun-fork', '--stage', 'first'],
        ['fork', 'flaky-rerun', '--from', 'first', '--dry-run'],
        // A fork under the id of an ended run would start from that run's folder: refused, naming the id.
        ['fork', 'flaky-rerun', '--from', 'second', '--id', 'flaky-rerun-fork'],
        ['rerun', 'flaky-never-was'],
      ],
      harness.env,
      240_000,
    );
    expect(rerun.exitCode, rerun.all).toBe(0);
    const state = parseJson<RunState>(rerun);
    // The source named by its id and by the run that bore it then (its first execution): later runs of the id are others.
    expect(state.forkedFrom).toEqual({ runId: 'flaky-source', firstExecutionRunId: harness.runRef('flaky-source').firstExecutionRunId, stage: 'second' });
    expect(state.stages.map((s) => [s.id, s.status, s.carriedCostUsd !== undefined])).toEqual([['first', 'completed', true], ['second', 'completed', false]]);
    expect(again.exitCode, again.all).toBe(0);
    const carried = (run: RunState) => run.stages.find((s) => s.id === 'first')?.carriedCostUsd;
    expect(carried(state)).toBeGreaterThan(0);
    expect(carried(parseJson<RunState>(again))).toBe(carried(state));
    // Neither the rerun nor its fork ran `first` again (a count that only grows: still the source's one call).
    expect(calls(harness, 'flaky-first')).toBe(1);
    expect(reused.exitCode, reused.all).toBe(2);
    expect(reused.stderr).toContain('[RUN_EXISTS] a run "flaky-rerun-fork" exists already (running or ended); pick another --id');
    expect(logs.exitCode, logs.all).toBe(0);
    expect(logs.stdout).toContain("══ flaky-rerun-fork · stage first (taken over: run flaky-source's transcript) · round 1 · attempt 1");
    expect(logs.stdout).toContain('first done');
    expect(fromTaken.exitCode).toBe(2);
    expect(fromTaken.stderr).toContain('[FORK_REFUSED] stage first of run flaky-rerun was taken over from run flaky-source: it first started there, so only flaky-source has the workspace of its start; fork run flaky-source instead: agent-pipeline fork flaky-source --from first');
    // A run Temporal no longer keeps cannot be forked, and the message says why such a run is gone.
    expect(gone.exitCode).toBe(2);
    expect(gone.stderr).toMatch(/FORK_REFUSED.*no run flaky-never-was.*retention/);
    // The source's file moved away: the error says the fork reads it again, and how to name the one to run.
    await rename(file, `${file}.moved`);
    const moved = await runCli(['rerun', 'flaky-source', '--dry-run'], harness.env, 60_000);
    expect(moved.exitCode).toBe(2);
    expect(moved.stderr).toContain(`[FILE_UNREADABLE] cannot read pipeline file ${file}: no such file; check the path. A fork reads run flaky-source's pipeline file again, from where it was started: name the file to run after the run id (agent-pipeline fork flaky-source --from STAGE FILE)`);
  });

  test('a fork from one of two parallel stages takes over only what had completed when it started', { timeout: 300_000 }, async () => {
    const yaml = [
      'name: pair',
      'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }',
      'stages:',
      '  - { id: a, prompt: Do a. }',
      '  - { id: b, prompt: Do b., needs: [a] }',
      '  - { id: c, prompt: Do c., needs: [a] }',
      '  - { id: d, prompt: Do d., needs: [b, c] }',
      '',
    ].join('\n');
    const file = await harness.writePipeline('pair', yaml);
    expect((await runToEnd(harness, file, 'pair-source')).status).toBe('completed');
    // b and c started together after a: b completed while c ran, but after c started.
    const [planned, forked] = await runCliCommands(
      [
        ['fork', 'pair-source', '--from', 'c', '--dry-run', '--json'],
        ['fork', 'pair-source', '--from', 'c', '--id', 'pair-fork', '--wait', '--json'],
      ],
      harness.env,
      240_000,
    );
    expect(parseJson(planned)).toMatchObject({ takenOver: ['a'], runAgain: ['b', 'c', 'd'], refused: [] });
    const fork = parseJson<RunState>(forked);
    expect(fork.status).toBe('completed');
    expect(fork.stages.filter((s) => s.carriedCostUsd !== undefined).map((s) => s.id)).toEqual(['a']);
    expect([calls(harness, 'pair-a'), calls(harness, 'pair-b'), calls(harness, 'pair-c'), calls(harness, 'pair-d')]).toEqual([1, 2, 2, 2]);
  });

  test('a fork from a stage whose first-start checkpoint the store lacks is refused at once, --dry-run included', { timeout: 300_000 }, async () => {
    const yaml = ['name: gap', 'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }', 'stages:', '  - { id: a, prompt: Do a. }', '  - { id: b, prompt: Do b., needs: [a] }', ''].join('\n');
    const file = await harness.writePipeline('gap', yaml);
    expect((await runToEnd(harness, file, 'gap-source')).status).toBe('completed');
    // As when the store was down at b's first start: its checkpoint was never written.
    const store = openStore({}, { defaultDir: path.join(harness.workspacesRoot, '.agent-pipeline', 'store') });
    const lost = await findStageStartCheckpoint(store, harness.runRef('gap-source'), 'b');
    expect(lost).toBeDefined();
    await store.deletePrefix(`${checkpointsPrefix(harness.runRef('gap-source'))}${lost!.id}/`);
    const [planned, forked, fromA] = await runCliCommands(
      [
        ['fork', 'gap-source', '--from', 'b', '--dry-run'],
        ['fork', 'gap-source', '--from', 'b', '--id', 'gap-fork'],
        ['fork', 'gap-source', '--from', 'a', '--dry-run', '--json'],
      ],
      harness.env,
      120_000,
    );
    for (const refusedFork of [planned, forked]) {
      expect(refusedFork.exitCode, refusedFork.all).toBe(2);
      expect(refusedFork.stderr).toMatch(/\[FORK_REFUSED\] run gap-source has no checkpoint of stage b's first start in file:\/\/.*; fork from another stage, or start the pipeline again/);
    }
    expect(fromA.exitCode, fromA.all).toBe(0);
    expect(parseJson(fromA)).toMatchObject({ from: 'a', runAgain: ['a', 'b'] });
    await expect(harness.client.workflow.getHandle('gap-fork').describe()).rejects.toThrow();
  });

  test('a run started from a definition is forked under that definition when no pipeline is given', { timeout: 300_000 }, async () => {
    const definition = definePipeline({
      name: 'fromcode',
      defaults: { backend: 'anthropic-api', model: 'haiku', retries: 0, maxTokens: 500 },
      stages: [{ id: 'a', prompt: 'Do a.' }, { id: 'b', prompt: 'Do b.', needs: ['a'] }],
    });
    const { handle } = await startRun(harness.client, await prepareRunInput(definition, {}, []), { taskQueue: harness.taskQueue, id: 'fromcode-source' });
    expect((await harness.finish(handle)).status).toBe('failed');
    // It names no file to read again: the fork runs the definition the source carried (it read `<cwd>/<definition fromcode>`).
    const [planned] = await runCliCommands([['rerun', 'fromcode-source', '--dry-run', '--json']], harness.env, 60_000);
    expect(planned.exitCode, planned.all).toBe(0);
    expect(parseJson(planned)).toMatchObject({ from: 'b', takenOver: ['a'], runAgain: ['b'], refused: [] });
    const client = await PipelineClient.connect({ env: harness.env });
    try {
      const rerun = await client.rerun('fromcode-source', { id: 'fromcode-rerun' });
      const state = await rerun.result();
      expect(state.stages.map((s) => [s.id, s.status, s.carriedCostUsd !== undefined])).toEqual([['a', 'completed', true], ['b', 'completed', false]]);
    } finally {
      await client.close();
    }
    expect([calls(harness, 'code-a'), calls(harness, 'code-b')]).toEqual([1, 2]);
  });

  test("started past the command line under the id of another run, or of its source, is refused by the worker, which leaves that run's folder and objects alone", { timeout: 300_000 }, async () => {
    const yaml = [
      'name: idfork',
      'defaults: { heartbeatTimeout: 30s, retries: 0 }',
      'stages:',
      '  - { id: one, run: "echo one > one.txt" }',
      '  - { id: two, run: "date +%s%N > two.txt", needs: [one] }',
      '',
    ].join('\n');
    const file = await harness.writePipeline('idfork', yaml);
    for (const id of ['idfork-source', 'idfork-other']) expect((await runToEnd(harness, file, id)).status).toBe('completed');
    const other = harness.runDir('idfork-other');
    await writeFile(path.join(other, 'mine.txt'), 'the other run\'s\n');
    const store = openStore({}, { defaultDir: path.join(harness.workspacesRoot, '.agent-pipeline', 'store') });
    // The run that had the id (its folder and checkpoints are named after its first execution), before its folder goes.
    const otherRun = harness.runRef('idfork-other');
    const objectsOf = async (): Promise<string[]> => {
      const keys: string[] = [];
      for await (const key of store.list(checkpointsPrefix(otherRun))) keys.push(key);
      return keys.sort();
    };
    const before = { folder: (await readdir(other)).sort(), two: await readFile(path.join(other, 'two.txt'), 'utf8'), objects: await objectsOf() };
    expect(before.objects).not.toEqual([]);
    // Temporal lets a start take the id of an ended run; the client refuses it for a fork (RUN_EXISTS), this start skips the client.
    const input = { ...(await prepareRunInput(file, {}, [])), fork: { runId: 'idfork-source', stage: 'two' } };
    const forge = async (id: string): Promise<RunState> => harness.finish((await startRun(harness.client, input, { taskQueue: harness.taskQueue, id })).handle);
    const refused = (state: RunState, said: string | RegExp): void => {
      expect(state.status).toBe('failed');
      expect(state.error).toMatchObject({ type: 'FORK_REFUSED', message: typeof said === 'string' ? expect.stringContaining(said) : expect.stringMatching(said) });
    };
    refused(await forge('idfork-other'), 'run id idfork-other has a folder on this worker already');
    expect({ folder: (await readdir(other)).sort(), two: await readFile(path.join(other, 'two.txt'), 'utf8'), objects: await objectsOf() }).toEqual(before);
    // The run's folder gone from this host (another host ran it): its checkpoints in the shared store still bear the id.
    await rm(other, { recursive: true, force: true });
    await rm(path.join(harness.workspacesRoot, '.agent-pipeline', 'runs', path.basename(other)), { recursive: true, force: true });
    refused(await forge('idfork-other'), /run id idfork-other has objects in file:\/\/.* already \(executions\/[0-9a-f]{64}\/checkpoints\//);
    expect(await objectsOf()).toEqual(before.objects);
    // Last: the source's own id makes this start the source's latest execution.
    refused(await forge('idfork-source'), 'run idfork-source names itself as the source it forks');
  });

  test('a fork of a git run starts its own branch at the source branch as it was, with the uncommitted work uncommitted, and pushes it', { timeout: 300_000 }, async () => {
    const base = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-fork-git-'));
    try {
      const repo = path.join(base, 'repo');
      const remote = path.join(base, 'remote.git');
      await initRepo(repo, { 'README.md': '# Widgets\n' });
      await cloneBare(repo, remote);
      await git(repo, 'remote', 'add', 'origin', remote);
      const yaml = (third: string) =>
        [
          'name: gitfork',
          `workspace: { repo: ${repo}, push: { remote: origin } }`,
          'defaults: { heartbeatTimeout: 30s, retries: 0 }',
          'stages:',
          '  - { id: one, run: "echo one > one.txt", commit: true }',
          '  - { id: two, run: "echo two > two.txt", needs: [one] }',
          `  - { id: three, run: "${third}", needs: [two], commit: true }`,
          '',
        ].join('\n');
      const file = await harness.writePipeline('gitfork', yaml('cat one.txt two.txt > three.txt'));
      expect((await runToEnd(harness, file, 'gitfork-source')).status).toBe('completed');
      const sourceTip = await git(remote, 'rev-parse', 'agent/gitfork-source');

      await writeFile(file, yaml('cat two.txt one.txt > three.txt'));
      const forked = await runCli(['fork', 'gitfork-source', '--from', 'three', '--id', 'gitfork-fork', '--wait', '--json'], harness.env, 240_000);
      expect(forked.exitCode, forked.all).toBe(0);
      const stages = parseJson<RunState>(forked).stages.map((s) => [s.id, s.status, s.carriedCostUsd !== undefined]);
      expect(stages.slice(0, 3), JSON.stringify(stages)).toEqual([['one', 'completed', true], ['two', 'completed', true], ['three', 'completed', false]]);
      // The fork's own branch, pushed: stage one's commit (where the source branch was when three started), then
      // three's, which holds two.txt (uncommitted in the source then) and the new three.txt. No checkpoint commit.
      const subjects = (await git(remote, 'log', '--format=%s', 'agent/gitfork-fork')).split('\n');
      expect(subjects.some((s) => s.includes('agent-pipeline checkpoint'))).toBe(false);
      expect(await git(remote, 'show', 'agent/gitfork-fork:three.txt')).toBe('two\none');
      expect(await git(remote, 'show', 'agent/gitfork-fork:two.txt')).toBe('two');
      expect(await git(remote, 'rev-parse', 'agent/gitfork-fork~1')).toBe(await git(remote, 'rev-parse', 'agent/gitfork-source~1'));
      // The source's branch did not move, and no checkpoint commit or hidden ref reached the remote.
      expect(await git(remote, 'rev-parse', 'agent/gitfork-source')).toBe(sourceTip);
      expect(await git(remote, 'for-each-ref', '--format=%(refname)')).not.toContain('refs/agent-pipeline/');
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });
});

describe('a fork of a git run whose branch template names neither run', () => {

  test("is refused by the command line and by the worker, before the source's branch is touched", { timeout: 300_000 }, async () => {
    const base = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-fork-branch-'));
    try {
      const repo = path.join(base, 'repo');
      await initRepo(repo, { 'README.md': '# Widgets\n' });
      const yaml = [
        'name: topicfork',
        'inputs: { topic: { default: dark } }',
        `workspace: { repo: ${repo}, branch: "feature/{{inputs.topic}}" }`,
        'defaults: { heartbeatTimeout: 30s, retries: 0 }',
        'stages:',
        '  - { id: one, run: "echo one > one.txt", commit: true }',
        '  - { id: two, run: "echo two > two.txt", needs: [one] }',
        '',
      ].join('\n');
      const file = await harness.writePipeline('topicfork', yaml);
      expect((await runToEnd(harness, file, 'topic-source')).status).toBe('completed');
      const tip = await git(repo, 'rev-parse', 'feature/dark');
      // The source's worktree is gone (cleaned up, or its host lost): the branch alone is left to take.
      await git(repo, 'worktree', 'remove', '--force', harness.runDir('topic-source'));

      const refused = await runCli(['fork', 'topic-source', '--from', 'two', '--dry-run'], harness.env, 60_000);
      expect(refused.exitCode).toBe(2);
      expect(refused.stderr).toContain('[FORK_REFUSED] the fork\'s branch would be feature/dark, the branch of run topic-source: workspace.branch "feature/{{inputs.topic}}"');
      // Started without the command line's check, the worker refuses it too.
      const input = { ...(await prepareRunInput(file, {}, [])), fork: { runId: 'topic-source', stage: 'two' } };
      const { handle } = await startRun(harness.client, input, { taskQueue: harness.taskQueue, id: 'topic-fork' });
      const fork = await harness.finish(handle);
      expect(fork.status).toBe('failed');
      expect(fork.error).toMatchObject({ type: 'FORK_REFUSED', message: expect.stringContaining("the fork's branch would be feature/dark") });
      expect(await git(repo, 'rev-parse', 'feature/dark')).toBe(tip);
      expect(await git(repo, 'worktree', 'list')).not.toContain('topic-fork');
      // With another topic the fork has a branch of its own.
      const other = await runCli(['fork', 'topic-source', '--from', 'two', '--input', 'topic=light', '--dry-run', '--json'], harness.env, 60_000);
      expect(other.exitCode, other.all).toBe(0);
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });
});

describe('a fork of a run with encrypted history', () => {
  // A worker of its own: it encrypts history with its key.
  let encrypted: Harness;
  beforeAll(async () => {
    encrypted = await createHarness('fork-encrypted', { scenario: { rules: RULES }, encryptionKey: generateEncryptionKey('fork-key').line });
  });
  afterAll(async () => {
    await encrypted?.close();
  });

  test('reads the source\'s encrypted input and state, and keeps its own input encrypted', { timeout: 300_000 }, async () => {
    const yaml = ['name: flaky', 'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }', 'stages:', '  - { id: first, prompt: Do the first part. }', '  - { id: second, prompt: Do the second part., needs: [first] }', ''].join('\n');
    const file = await encrypted.writePipeline('flaky', yaml);
    // The first call of `second` fails for good: the source fails there, and the rerun takes `first` over. The harness's
    // client encrypts as a key holder's does.
    expect((await runToEnd(encrypted, file, 'enc-source')).status).toBe('failed');
    const rerun = await runCli(['rerun', 'enc-source', '--id', 'enc-rerun', '--wait', '--json'], encrypted.env, 240_000);
    expect(rerun.exitCode, rerun.all).toBe(0);
    expect(parseJson<RunState>(rerun).stages.map((s) => [s.id, s.carriedCostUsd !== undefined])).toEqual([['first', true], ['second', false]]);
    // The fork's start input, which names its source, is as encrypted in the history as any other run's.
    const page = await encrypted.client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId: 'enc-rerun' }, maximumPageSize: 1 });
    const payload = page.history!.events![0].workflowExecutionStartedEventAttributes!.input!.payloads![0];
    expect(Buffer.from(payload.metadata!.encoding!).toString()).toBe('binary/encrypted');
    expect(Buffer.from(payload.data!).toString('latin1')).not.toContain('enc-source');
  });
});
