import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import { cloneBare, git, initRepo } from '../helpers/git-repo.js';
import { generateEncryptionKey } from '../../src/trust/keys.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { parseJson, runCli } from './cli-helpers.js';

/*
 * Forking a run (docs/forking.md), as a person does it from the command line: a four-stage pipeline runs with the real
 * `claude` in its sandbox; a step file is edited; `fork --from stage3` runs stages 3 and 4 only, in a workspace that
 * holds what stages 1 and 2 wrote, and shows their cost as carried. A change to a stage it would take over is
 * refused, naming the field, unless forced. `rerun` of a failed run does not run its completed stages again, and a
 * fork from one of two parallel stages takes over only what had completed when it started.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string, extra: Record<string, unknown> = {}): string => `Done.\n\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {}, ...extra })}\n\`\`\``;
const bash = (command: string, then: string): Rule['turns'] => [{ text: 'Working.', tool: { name: 'Bash', input: { command, description: 'Write the file' } } }, { text: report(then) }];

const RULES: Rule[] = [
  { name: 'stage1', match: 'Pipeline: forky · Stage: stage1 ·', turns: bash('echo one > one.txt', 'wrote one') },
  { name: 'stage2', match: 'Pipeline: forky · Stage: stage2 ·', turns: bash('echo two > two.txt', 'wrote two') },
  { name: 'stage3', match: 'Pipeline: forky · Stage: stage3 ·', turns: bash('cat one.txt two.txt > three.txt', 'joined them') },
  { name: 'stage4', match: 'Pipeline: forky · Stage: stage4 ·', turns: [{ text: report('checked') }] },
  // The API backend keeps the other two pipelines quick; the first call of `second` fails for good, the next succeeds.
  { name: 'flaky-first', match: 'Pipeline: flaky · Stage: first ·', turns: [{ text: report('first done') }] },
  { name: 'flaky-second', match: 'Pipeline: flaky · Stage: second ·', turns: [{ text: report('second done'), failFirst: [{ status: 400, shouldRetry: false }] }] },
  // Forked from `review` with a stricter prompt, the reviewer sends the taken-over `impl` back once.
  { name: 'strict-review', match: 'Review strictly.', turns: [{ text: report('not yet', { verdict: 'rework', feedback: ['F1: name the function'] }) }, { text: report('good now', { verdict: 'approve', feedback: [] }) }] },
  { name: 'review', match: 'Pipeline: loop · Stage: review ·', turns: [{ text: report('fine', { verdict: 'approve', feedback: [] }) }] },
  { name: 'impl', match: 'Pipeline: loop · Stage: impl ·', turns: [{ text: report('impl done') }, { text: report('renamed it') }] },
  { name: 'pair-a', match: 'Pipeline: pair · Stage: a ·', turns: [{ text: report('a done') }] },
  { name: 'pair-b', match: 'Pipeline: pair · Stage: b ·', turns: [{ text: report('b done'), delayMs: 500 }] },
  { name: 'pair-c', match: 'Pipeline: pair · Stage: c ·', turns: [{ text: report('c done'), delayMs: 3_000 }] },
  { name: 'pair-d', match: 'Pipeline: pair · Stage: d ·', turns: [{ text: report('d done') }] },
];

const FORKY = [
  'name: forky',
  'defaults: { backend: claude-cli, model: sonnet, retries: 0, permissionMode: dontAsk, allowedTools: [Bash, Read] }',
  'stages:',
  '  - { id: stage1, prompt: steps/one.md }',
  '  - { id: stage2, prompt: steps/two.md, needs: [stage1] }',
  '  - { id: stage3, prompt: steps/three.md, needs: [stage2] }',
  '  - { id: stage4, prompt: Check three.txt., needs: [stage3] }',
  '',
].join('\n');

describe('fork and rerun', () => {
  let harness: Harness;
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    harness = await createHarness('fork', { scenario: { rules: RULES } });
    env = { ...harness.env };
  });
  afterAll(async () => {
    await harness?.close();
  });

  /** Writes `files` (relative to a pipeline folder of the harness) and returns that folder. */
  const writeFiles = async (name: string, yaml: string, files: Record<string, string>): Promise<string> => {
    const file = await harness.writePipeline(name, yaml);
    const dir = path.dirname(file);
    for (const [relative, text] of Object.entries(files)) {
      await mkdir(path.dirname(path.join(dir, relative)), { recursive: true });
      await writeFile(path.join(dir, relative), text);
    }
    return file;
  };
  const calls = (rule: string): number => harness.modelServer.requests().filter((r) => r.path === '/v1/messages' && r.rule === rule).length;
  const startWaiting = async (file: string, id: string): Promise<RunState> => parseJson<RunState>(await runCli(['start', file, '--id', id, '--wait', '--json'], env, 240_000));

  test('fork --from stage3 after an edit runs stages 3 and 4 only, on the files stages 1 and 2 wrote, with their cost carried', { timeout: 480_000 }, async () => {
    const file = await writeFiles('forky', FORKY, { 'steps/one.md': 'Write one.txt.\n', 'steps/two.md': 'Write two.txt.\n', 'steps/three.md': 'Join the files.\n' });
    const source = await startWaiting(file, 'forky-source');
    expect(source.status).toBe('completed');
    const before = { stage1: calls('stage1'), stage2: calls('stage2'), stage3: calls('stage3'), stage4: calls('stage4') };

    // The person tunes stage 3's prompt, looks at the plan, then forks.
    await writeFile(path.join(path.dirname(file), 'steps/three.md'), 'Join the two files, one after the other.\n');
    const plan = await runCli(['fork', 'forky-source', '--from', 'stage3', '--dry-run', '--json'], env);
    expect(plan.exitCode, plan.all).toBe(0);
    expect(parseJson(plan)).toMatchObject({ from: 'stage3', takenOver: ['stage1', 'stage2'], runAgain: ['stage3', 'stage4'], refused: [] });
    const forked = await runCli(['fork', 'forky-source', '--from', 'stage3', '--id', 'forky-fork', '--wait', '--json'], env, 240_000);
    expect(forked.exitCode, forked.all).toBe(0);
    const fork = parseJson<RunState>(forked);

    expect(fork.status).toBe('completed');
    expect(fork.forkedFrom).toEqual({ runId: 'forky-source', stage: 'stage3' });
    // The model was called for stages 3 and 4 only, and stage 3 ran its edited prompt.
    expect(calls('stage1')).toBe(before.stage1);
    expect(calls('stage2')).toBe(before.stage2);
    expect(calls('stage3')).toBe(before.stage3 * 2);
    expect(calls('stage4')).toBe(before.stage4 * 2);
    const lastStage3 = harness.modelServer.requests().filter((r) => r.rule === 'stage3').at(-1);
    expect(JSON.stringify(lastStage3?.body)).toContain('one after the other');
    // Stage 3 found the files stages 1 and 2 wrote in the source run.
    expect(await readFile(path.join(harness.runDir('forky-fork'), 'three.txt'), 'utf8')).toBe('one\ntwo\n');
    // What the fork spent is stages 3 and 4; stages 1 and 2 cost the source run and are shown as carried.
    const stage = (id: string) => fork.stages.find((s) => s.id === id)!;
    const sourceStage = (id: string) => source.stages.find((s) => s.id === id)!;
    expect(stage('stage1')).toMatchObject({ status: 'completed', carriedCostUsd: sourceStage('stage1').totals!.costUsd });
    expect(stage('stage1').totals).toBeUndefined();
    expect(stage('stage1').result?.summary).toBe('wrote one');
    expect(fork.carriedCostUsd).toBeCloseTo(sourceStage('stage1').totals!.costUsd + sourceStage('stage2').totals!.costUsd, 10);
    expect(fork.costUsd).toBeCloseTo(stage('stage3').totals!.costUsd + stage('stage4').totals!.costUsd, 10);
    expect(fork.costUsd).toBeGreaterThan(0);

    const status = await runCli(['status', 'forky-fork'], env);
    expect(status.stdout).toContain('forked from forky-source at stage3');
    expect(status.stdout).toMatch(/stage1.*carried/);
    const { runs } = parseJson<{ runs: { runId: string; forkedFrom: unknown }[] }>(await runCli(['list', '--json'], env));
    expect(runs.find((r) => r.runId === 'forky-fork')?.forkedFrom).toEqual({ runId: 'forky-source', stage: 'stage3' });

    // Stage 1's prompt changed too: a fork from stage 3 would take over work its new prompt did not ask for.
    await writeFile(path.join(path.dirname(file), 'steps/one.md'), 'Write one.txt, in capitals.\n');
    const refused = await runCli(['fork', 'forky-source', '--from', 'stage3'], env);
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toContain('FORK_REFUSED');
    expect(refused.stderr).toContain('stage1.prompt');
    const forced = await runCli(['fork', 'forky-source', '--from', 'stage3', '--force', '--id', 'forky-forced', '--wait', '--json'], env, 240_000);
    expect(forced.exitCode, forced.all).toBe(0);
    expect(parseJson<RunState>(forced).forkedFrom).toEqual({ runId: 'forky-source', stage: 'stage3', forced: true });
    expect(calls('stage1')).toBe(before.stage1);
    const { memo } = await harness.client.workflow.getHandle('forky-forced').describe();
    expect(memo).toMatchObject({ forkForced: true, forkedFrom: { runId: 'forky-source', stage: 'stage3' } });
  });

  test('rerun of a run that failed at its second stage, once the file is fixed, does not run the first again', { timeout: 300_000 }, async () => {
    const yaml = (second: string) =>
      ['name: flaky', 'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }', 'stages:', '  - { id: first, prompt: Do the first part. }', `  - { id: second, prompt: ${second}, needs: [first] }`, ''].join('\n');
    const file = await harness.writePipeline('flaky', yaml('Do the second part.'));
    const failed = await runCli(['start', file, '--id', 'flaky-source', '--wait', '--json'], env, 240_000);
    expect(failed.exitCode).toBe(1);
    expect(calls('flaky-first')).toBe(1);

    await writeFile(file, yaml('Do the second part with care.'));
    const rerun = await runCli(['rerun', 'flaky-source', '--id', 'flaky-rerun', '--wait', '--json'], env, 240_000);
    expect(rerun.exitCode, rerun.all).toBe(0);
    const state = parseJson<RunState>(rerun);
    expect(state.forkedFrom).toEqual({ runId: 'flaky-source', stage: 'second' });
    expect(state.stages.map((s) => [s.id, s.status, s.carriedCostUsd !== undefined])).toEqual([['first', 'completed', true], ['second', 'completed', false]]);
    expect(calls('flaky-first')).toBe(1);
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
    expect((await startWaiting(file, 'pair-source')).status).toBe('completed');
    // b and c started together after a: b completed while c ran, but after c started.
    const plan = parseJson(await runCli(['fork', 'pair-source', '--from', 'c', '--dry-run', '--json'], env));
    expect(plan).toMatchObject({ takenOver: ['a'], runAgain: ['b', 'c', 'd'], refused: [] });
    const fork = parseJson<RunState>(await runCli(['fork', 'pair-source', '--from', 'c', '--id', 'pair-fork', '--wait', '--json'], env, 240_000));
    expect(fork.status).toBe('completed');
    expect(fork.stages.filter((s) => s.carriedCostUsd !== undefined).map((s) => s.id)).toEqual(['a']);
    expect([calls('pair-a'), calls('pair-b'), calls('pair-c'), calls('pair-d')]).toEqual([1, 2, 2, 2]);
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
      expect((await startWaiting(file, 'gitfork-source')).status).toBe('completed');
      const sourceTip = await git(remote, 'rev-parse', 'agent/gitfork-source');

      await writeFile(file, yaml('cat two.txt one.txt > three.txt'));
      const forked = await runCli(['fork', 'gitfork-source', '--from', 'three', '--id', 'gitfork-fork', '--wait', '--json'], env, 240_000);
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

  test('a rework of a taken-over stage resumes that stage\'s own agent session in the fork', { timeout: 300_000 }, async () => {
    const yaml = (review: string) =>
      [
        'name: loop',
        'defaults: { backend: claude-cli, model: sonnet, retries: 0, permissionMode: dontAsk }',
        'stages:',
        '  - { id: impl, prompt: Write the code. }',
        `  - { id: review, prompt: ${review}, needs: [impl], review: { of: impl } }`,
        '',
      ].join('\n');
    const file = await harness.writePipeline('loop', yaml('Review the code.'));
    expect((await startWaiting(file, 'loop-source')).status).toBe('completed');
    await writeFile(file, yaml('Review strictly.'));
    const forked = await runCli(['fork', 'loop-source', '--from', 'review', '--id', 'loop-fork', '--wait', '--json'], env, 240_000);
    expect(forked.exitCode, forked.all).toBe(0);
    const state = parseJson<RunState>(forked);
    expect(state.stages.find((s) => s.id === 'impl')).toMatchObject({ status: 'completed', round: 2 });
    // impl's rework went on in the conversation it had in the source run: its first prompt and answer are in it.
    const rework = harness.modelServer.requests().filter((r) => r.rule === 'impl').at(-1);
    const conversation = JSON.stringify(rework?.body);
    expect(conversation).toContain('Write the code.');
    expect(conversation).toContain('impl done');
    expect(conversation).toContain('F1: name the function');
  });
});

describe('a fork of a run with encrypted history', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('fork-encrypted', { scenario: { rules: RULES }, encryptionKey: generateEncryptionKey('fork-key').line });
  });
  afterAll(async () => {
    await harness?.close();
  });

  test('reads the source\'s encrypted input and state, and keeps its own input encrypted', { timeout: 300_000 }, async () => {
    const yaml = ['name: flaky', 'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }', 'stages:', '  - { id: first, prompt: Do the first part. }', '  - { id: second, prompt: Do the second part., needs: [first] }', ''].join('\n');
    const file = await harness.writePipeline('flaky', yaml);
    // The first call of `second` fails for good: the source fails there, and the rerun takes `first` over.
    expect((await runCli(['start', file, '--id', 'enc-source', '--wait', '--json'], harness.env, 240_000)).exitCode).toBe(1);
    const rerun = await runCli(['rerun', 'enc-source', '--id', 'enc-rerun', '--wait', '--json'], harness.env, 240_000);
    expect(rerun.exitCode, rerun.all).toBe(0);
    expect(parseJson<RunState>(rerun).stages.map((s) => [s.id, s.carriedCostUsd !== undefined])).toEqual([['first', true], ['second', false]]);
    // The fork's start input, which names its source, is as encrypted in the history as any other run's.
    const page = await harness.client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId: 'enc-rerun' }, maximumPageSize: 1 });
    const payload = page.history!.events![0].workflowExecutionStartedEventAttributes!.input!.payloads![0];
    expect(Buffer.from(payload.metadata!.encoding!).toString()).toBe('binary/encrypted');
    expect(Buffer.from(payload.data!).toString('latin1')).not.toContain('enc-source');
  });
});
