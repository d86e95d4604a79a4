import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunState } from '../../src/pipeline/run-state.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { parseJson, runCli, runCliCommands } from './cli-helpers.js';
import { calls, reviewLoopPipeline, RULES, runToEnd } from './fork-helpers.js';

/*
 * Forking a run (docs/forking.md), as a person does it from the command line, with the real `claude` in its sandbox:
 * a four-stage pipeline runs; a step file is edited; `fork --from stage3` runs stages 3 and 4 only, in a workspace that
 * holds what stages 1 and 2 wrote, and shows their cost as carried. A change to a stage it would take over is refused,
 * naming the field, unless forced. A review's rework of a taken-over stage resumes that stage's own session.
 * Only stage 3 (which joins the files stages 1 and 2 left, in its sandbox) and the reworked stage run `claude`: the
 * other agents are not what these tests look at, and the API backend spares a `claude` process each.
 * fork-rerun.test.ts has `rerun`, parallel stages, git workspaces and encrypted history.
 */

const FORKY = [
  'name: forky',
  'defaults: { backend: claude-cli, model: sonnet, retries: 0, permissionMode: dontAsk, allowedTools: [Bash, Read] }',
  'stages:',
  // Stages 1 and 2 leave one.txt and two.txt in the workspace (their answers, through `output:`).
  '  - { id: stage1, backend: anthropic-api, maxTokens: 500, prompt: steps/one.md, output: one.txt }',
  '  - { id: stage2, backend: anthropic-api, maxTokens: 500, prompt: steps/two.md, output: two.txt, needs: [stage1] }',
  '  - { id: stage3, prompt: steps/three.md, needs: [stage2] }',
  // Stage 4's agent is not what these tests look at: the API backend spares a `claude` process in each of three runs.
  '  - { id: stage4, backend: anthropic-api, maxTokens: 500, prompt: Check three.txt., needs: [stage3] }',
  '',
].join('\n');

describe('fork', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('fork', { scenario: { rules: RULES } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  /** Writes the pipeline `yaml` and `files` (relative to its folder); returns the pipeline file. */
  const writeFiles = async (name: string, yaml: string, files: Record<string, string>): Promise<string> => {
    const file = await harness.writePipeline(name, yaml);
    const dir = path.dirname(file);
    for (const [relative, text] of Object.entries(files)) {
      await mkdir(path.dirname(path.join(dir, relative)), { recursive: true });
      await writeFile(path.join(dir, relative), text);
    }
    return file;
  };

  test('fork --from stage3 after an edit runs stages 3 and 4 only, on the files stages 1 and 2 wrote, with their cost carried', { timeout: 480_000 }, async () => {
    const file = await writeFiles('forky', FORKY, { 'steps/one.md': 'Write one.txt.\n', 'steps/two.md': 'Write two.txt.\n', 'steps/three.md': 'Join the files.\n' });
    const source = await runToEnd(harness, file, 'forky-source');
    expect(source.status).toBe('completed');
    const before = { stage1: calls(harness, 'stage1'), stage2: calls(harness, 'stage2'), stage3: calls(harness, 'stage3'), stage4: calls(harness, 'stage4') };

    // The person tunes stage 3's prompt, looks at the plan, forks, then looks at the fork and the list. The commands run
    // back to back in one process, each through the CLI's entry with its own argv, output and exit code (a process
    // each cost half a CPU second); the second test's fork runs as a user runs it.
    await writeFile(path.join(path.dirname(file), 'steps/three.md'), 'Join the two files, one after the other.\n');
    const [plan, forked, status, listed, listedJson] = await runCliCommands(
      [
        ['fork', 'forky-source', '--from', 'stage3', '--dry-run', '--json'],
        ['fork', 'forky-source', '--from', 'stage3', '--id', 'forky-fork', '--wait', '--json'],
        ['status', 'forky-fork'],
        // The dev server is shared by every test file: only this pipeline's runs (the newest 20 of all could be others').
        ['list', '--pipeline', 'forky'],
        ['list', '--pipeline', 'forky', '--json'],
      ],
      harness.env,
      300_000,
    );
    expect(plan.exitCode, plan.all).toBe(0);
    expect(parseJson(plan)).toMatchObject({ from: 'stage3', takenOver: ['stage1', 'stage2'], runAgain: ['stage3', 'stage4'], refused: [] });
    expect(forked.exitCode, forked.all).toBe(0);
    const fork = parseJson<RunState>(forked);

    expect(fork.status).toBe('completed');
    expect(fork.forkedFrom).toEqual({ runId: 'forky-source', firstExecutionRunId: source.firstExecutionRunId, stage: 'stage3' });
    // The model was called for stages 3 and 4 only, and stage 3 ran its edited prompt.
    expect(calls(harness, 'stage1')).toBe(before.stage1);
    expect(calls(harness, 'stage2')).toBe(before.stage2);
    expect(calls(harness, 'stage3')).toBe(before.stage3 * 2);
    expect(calls(harness, 'stage4')).toBe(before.stage4 * 2);
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
    expect(fork.carriedCostUsd).toBeGreaterThan(0);
    expect(fork.carriedCostUsd).toBeCloseTo(sourceStage('stage1').totals!.costUsd + sourceStage('stage2').totals!.costUsd, 10);
    expect(fork.costUsd).toBeCloseTo(stage('stage3').totals!.costUsd + stage('stage4').totals!.costUsd, 10);
    expect(fork.costUsd).toBeGreaterThan(0);

    expect(status.stdout).toContain('forked from forky-source at stage3');
    expect(status.stdout).toMatch(/stage1.*carried/);
    expect(listed.stdout).toMatch(/forky-fork .* forky-source at stage3/);
    const { runs } = parseJson<{ runs: { runId: string; forkedFrom: unknown }[] }>(listedJson);
    expect(runs.find((r) => r.runId === 'forky-fork')?.forkedFrom).toEqual({ runId: 'forky-source', stage: 'stage3' });

    // Stage 1's prompt changed too: a fork from stage 3 would take over work its new prompt did not ask for; one from
    // stage 4 also stage 3's, changed before. Forced, the fork from stage 4 runs stage 4 alone (an API stage, where one
    // from stage 3 would have started `claude` again for what the first fork showed).
    await writeFile(path.join(path.dirname(file), 'steps/one.md'), 'Write one.txt, in capitals.\n');
    const [refused, refusedLater, forced] = await runCliCommands(
      [
        ['fork', 'forky-source', '--from', 'stage3'],
        ['fork', 'forky-source', '--from', 'stage4'],
        ['fork', 'forky-source', '--from', 'stage4', '--force', '--id', 'forky-forced', '--wait', '--json'],
      ],
      harness.env,
      240_000,
    );
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toContain('FORK_REFUSED');
    expect(refused.stderr).toContain('stage1.prompt');
    expect(refusedLater.exitCode).toBe(2);
    expect(refusedLater.stderr).toContain('FORK_REFUSED');
    expect(refusedLater.stderr).toContain('stage1.prompt');
    expect(refusedLater.stderr).toContain('stage3.prompt');
    expect(forced.exitCode, forced.all).toBe(0);
    expect(parseJson<RunState>(forced).forkedFrom).toEqual({ runId: 'forky-source', firstExecutionRunId: source.firstExecutionRunId, stage: 'stage4', forced: true });
    expect(calls(harness, 'stage1')).toBe(before.stage1);
    expect(calls(harness, 'stage3')).toBe(before.stage3 * 2);
    expect(calls(harness, 'stage4')).toBe(before.stage4 * 3);
    const { memo } = await harness.client.workflow.getHandle('forky-forced').describe();
    expect(memo).toMatchObject({ forkForced: true, forkedFrom: { runId: 'forky-source', stage: 'stage4' } });
  });

  test('a rework of a taken-over stage resumes that stage\'s own agent session in the fork', { timeout: 300_000 }, async () => {
    const file = await harness.writePipeline('loop', reviewLoopPipeline('Review the code.'));
    expect((await runToEnd(harness, file, 'loop-source')).status).toBe('completed');
    await writeFile(file, reviewLoopPipeline('Review strictly.'));
    const forked = await runCli(['fork', 'loop-source', '--from', 'review', '--id', 'loop-fork', '--wait', '--json'], harness.env, 240_000);
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
