import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createRunBundle } from '../../src/bundle/create-run-bundle.js';
import { loadPipelineFile } from '../../src/library/load-pipeline.js';
import type { PipelineRunInput } from '../../src/contracts/messages.js';
import { previewFork } from '../../src/library/fork-run.js';
import { findSharedBranchProblem } from '../../src/pipeline/fork-branch.js';
import { describeRefusals, forkStart, planFork, rerunFrom, type ForkSide, type ForkSourceStage } from '../../src/pipeline/fork-plan.js';
import type { RunState, StageState } from '../../src/pipeline/run-state.js';

/*
 * The plan of a fork (docs/forking.md), from real pipeline files and the bundles `start` makes of them: which stages
 * are taken over, which run again, and which changes refuse it, each named `<stage>.<field>`.
 */

const PIPELINE = [
  'name: four',
  'inputs: { topic: { required: true }, tone: { default: plain } }',
  'defaults: { backend: claude-cli, model: sonnet }',
  'stages:',
  '  - { id: stage1, prompt: steps/one.md }',
  '  - { id: stage2, needs: [stage1], prompt: "Summarise {{inputs.tone}}." }',
  '  - { id: stage3, needs: [stage2], prompt: steps/three.md }',
  '  - { id: stage4, needs: [stage3], prompt: Finish. }',
  'finally:',
  '  - { id: tidy, prompt: Tidy up. }',
  '',
].join('\n');

/** The source run: stages 1-2 completed before stage3 first started at t=300, stage 4 later. */
const STAGES: ForkSourceStage[] = [
  { id: 'stage1', status: 'completed', finishedAt: 100 },
  { id: 'stage2', status: 'completed', finishedAt: 200 },
  { id: 'stage3', status: 'completed', finishedAt: 400 },
  { id: 'stage4', status: 'failed', finishedAt: 500 },
  { id: 'tidy', status: 'completed', finishedAt: 600, finally: true },
];

describe('the plan of a fork', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'fork-plan-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** Writes the pipeline (or `yaml`) and its step files into a fresh folder; returns it as a fork side. */
  const side = async (name: string, files: { yaml?: string; one?: string; three?: string } = {}, inputs: Record<string, string> = { topic: 'cats', tone: 'plain' }): Promise<ForkSide> => {
    const folder = path.join(dir, name);
    await mkdir(path.join(folder, 'steps'), { recursive: true });
    const file = path.join(folder, 'pipeline.yaml');
    await writeFile(file, files.yaml ?? PIPELINE);
    await writeFile(path.join(folder, 'steps', 'one.md'), files.one ?? 'Write about {{inputs.topic}}.\n');
    await writeFile(path.join(folder, 'steps', 'three.md'), files.three ?? 'Read what came before.\n');
    const { pipeline } = await loadPipelineFile(file);
    return { pipeline, bundle: await createRunBundle(file, pipeline), inputs };
  };

  test('takes over what completed before the stage first started, and runs the rest and every finally stage again', async () => {
    const source = { side: await side('a'), stages: STAGES };
    const plan = planFork(source, await side('b', { three: 'Read it all again, better.\n' }), 'stage3', 300);
    expect(plan).toEqual({ takenOver: ['stage1', 'stage2'], runAgain: ['stage3', 'stage4', 'tidy'], refused: [] });
  });

  test("refuses when a taken-over stage's step file changed, naming stage1.prompt; force takes it over anyway", async () => {
    const source = { side: await side('a'), stages: STAGES };
    const changed = await side('b', { one: 'Write about {{inputs.topic}}, at length.\n' });
    expect(planFork(source, changed, 'stage3', 300).refused).toEqual([{ stage: 'stage1', field: 'stage1.prompt', reason: 'the content of its prompt file changed' }]);
    expect(planFork(source, changed, 'stage3', 300, true)).toEqual({ takenOver: ['stage1', 'stage2'], runAgain: ['stage3', 'stage4', 'tidy'], refused: [] });
  });

  test("refuses a changed model (a default the stage takes) and a changed input the stage read, even forced", async () => {
    const source = { side: await side('a'), stages: STAGES };
    const opus = await side('b', { yaml: PIPELINE.replace('model: sonnet', 'model: opus') });
    expect(planFork(source, opus, 'stage3', 300).refused.map((r) => r.field)).toEqual(['stage1.model', 'stage2.model']);
    const tone = await side('c', {}, { topic: 'cats', tone: 'warm' });
    expect(planFork(source, tone, 'stage3', 300, true).refused).toEqual([{ stage: 'stage2', field: 'stage2.inputs.tone', reason: 'it read the input tone, whose value changed' }]);
  });

  test('a stage that completed after the fork stage started, or is gone from the new file, is not taken over', async () => {
    const source = { side: await side('a'), stages: STAGES };
    expect(planFork(source, await side('b'), 'stage2', 150).takenOver).toEqual(['stage1']);
    const without = await side('c', { yaml: PIPELINE.replace('  - { id: stage1, prompt: steps/one.md }\n', '').replace('needs: [stage1], ', '') });
    expect(planFork(source, without, 'stage3', 300)).toMatchObject({ takenOver: ['stage2'], runAgain: ['stage3', 'stage4', 'tidy'] });
  });

  test('knows command stages: their command and environment are compared, not the agents\' defaults they do not take', async () => {
    const commands = [
      'name: cmds',
      'inputs: { level: { default: fast } }',
      'defaults: { model: sonnet }',
      'stages:',
      '  - { id: build, run: "make all" }',
      '  - { id: check, needs: [build], run: [sh, -c, "make check"], env: { LEVEL: "{{inputs.level}}" } }',
      '  - { id: ship, needs: [check], prompt: Ship it. }',
      '',
    ].join('\n');
    const stages: ForkSourceStage[] = [
      { id: 'build', status: 'completed', finishedAt: 100 },
      { id: 'check', status: 'completed', finishedAt: 200 },
      { id: 'ship', status: 'completed', finishedAt: 400 },
    ];
    const source = { side: await side('a', { yaml: commands }, { level: 'fast' }), stages };
    // The agents' model changed: the command stages run as they did, and are taken over.
    expect(planFork(source, await side('b', { yaml: commands.replace('model: sonnet', 'model: opus') }, { level: 'fast' }), 'ship', 300).refused).toEqual([]);
    expect(planFork(source, await side('c', { yaml: commands.replace('make all', 'make everything') }, { level: 'fast' }), 'ship', 300).refused.map((r) => r.field)).toEqual(['build.run']);
    expect(planFork(source, await side('d', { yaml: commands }, { level: 'thorough' }), 'ship', 300, true).refused.map((r) => r.field)).toEqual(['check.inputs.level']);
  });

  test('a rerun forks from the stage that did not complete and started first', () => {
    expect(rerunFrom(STAGES)).toBeUndefined();
    expect(rerunFrom([
      { id: 'a', status: 'completed', startedAt: 1, finishedAt: 50 },
      { id: 'b', status: 'failed', startedAt: 60, finishedAt: 90 },
      { id: 'c', status: 'cancelled', startedAt: 55, finishedAt: 90 },
      { id: 'd', status: 'pending' },
    ])).toBe('c');
  });

  test('refuses, before any plan, what cannot be forked: a lent folder, files read from the worker, an unknown or never started stage', async () => {
    const started = STAGES.map((s) => ({ ...s, startedAt: (s.finishedAt ?? 0) - 50 }));
    const a = await side('a');
    const source = { side: a, stages: started };
    expect(forkStart('src', source, await side('b'), 'stage3')).toEqual({ from: 'stage3' });
    const lent = { side: { ...a, pipeline: { ...a.pipeline, workspace: { dir: '/srv/app' } } }, stages: started };
    expect(forkStart('src', lent, a, 'stage3')).toMatchObject({ message: expect.stringContaining('lent folder (workspace.dir)') });
    expect(forkStart('src', { side: { ...a, bundle: undefined }, stages: started }, a, 'stage3')).toMatchObject({ message: expect.stringContaining('run src read its pipeline files from the worker') });
    expect(forkStart('src', source, a, 'stage9')).toEqual({ message: 'run src has no stage stage9 (--from)', fix: 'name one of its stages: stage1, stage2, stage3, stage4' });
    expect(forkStart('src', { side: a, stages: STAGES }, a, 'stage3')).toMatchObject({ message: 'stage stage3 of run src never started, so there is no workspace of its start to fork from' });
    // A rerun forks from the stage that did not complete: stage4 here.
    expect(forkStart('src', source, a, undefined)).toEqual({ from: 'stage4' });
    expect(describeRefusals('src', [{ stage: 'stage2', field: 'stage2.inputs.tone', reason: 'it read the input tone, whose value changed' }])).toEqual({
      message: 'a stage the fork would take over from run src changed: stage2.inputs.tone (it read the input tone, whose value changed)',
      fix: 'fork from an earlier stage, or give the inputs the values the source run had',
    });
  });

  test("refuses a fork of a fork from a stage it took over, naming the run it ran in and the fork to start instead", async () => {
    const a = await side('a');
    const stages = STAGES.map((s) => ({ ...s, startedAt: (s.finishedAt ?? 0) - 50, ...(s.id === 'stage2' ? { carriedCostUsd: 0.5 } : {}) }));
    expect(forkStart('fork-1', { side: a, stages, forkedFrom: { runId: 'src' } }, a, 'stage2')).toEqual({
      message: 'stage stage2 of run fork-1 was taken over from run src: it first started there, so only src has the workspace of its start',
      fix: 'fork run src instead: agent-pipeline fork src --from stage2',
    });
    expect(forkStart('fork-1', { side: a, stages, forkedFrom: { runId: 'src' } }, a, 'stage3')).toEqual({ from: 'stage3' });
  });

  /** A run's state and start input as the client reads them, from a fork side and its stages. */
  const source = (input: ForkSide, stages: Partial<StageState>[]) => ({
    state: { runId: 'src', pipeline: input.pipeline.name, status: 'completed', inputs: input.inputs, costUsd: 0, startedAt: 0, stages } as RunState,
    input: { ...input, baseDir: dir, pipelineFile: 'pipeline.yaml' } as PipelineRunInput,
  });

  test('the preview plans from when the stage first started: a stage a review sent back after that is run again, as the worker plans it', async () => {
    const a = await side('a');
    // stage3 first started at 300; a review sent stage2 back, which completed again at 350, and stage3 started again at 400.
    const stages = [
      { id: 'stage1', status: 'completed', startedAt: 50, finishedAt: 100 },
      { id: 'stage2', status: 'completed', startedAt: 320, firstStartedAt: 150, finishedAt: 350, round: 2 },
      { id: 'stage3', status: 'completed', startedAt: 400, firstStartedAt: 300, finishedAt: 450, round: 2 },
    ] as StageState[];
    const preview = previewFork('src', source(a, stages), { runId: 'fork-1', input: source(a, []).input }, { stage: 'stage3' });
    expect(preview).toMatchObject({ from: 'stage3', takenOver: ['stage1'], runAgain: ['stage2', 'stage3', 'stage4', 'tidy'] });
  });

  test("refuses a git fork whose workspace.branch gives it the source's own branch, naming the branch and the template", async () => {
    const git = (branch: string) => PIPELINE.replace('stages:', `workspace: { repo: ., ${branch} }\nstages:`);
    const shared = await side('a', { yaml: git('branch: "feature/{{inputs.topic}}"') });
    expect(findSharedBranchProblem({ ...shared, runId: 'src' }, { ...shared, runId: 'fork-1' })).toEqual({
      message: 'the fork\'s branch would be feature/cats, the branch of run src: workspace.branch "feature/{{inputs.topic}}" gives both runs the same name, so the fork would work on the source\'s branch (and push it)',
      fix: 'put {{run.id}} in workspace.branch (its default is agent/{{run.id}}), or change with --input an input the branch name uses',
    });
    // Another topic, a branch naming the run, or the default: the fork's own branch.
    expect(findSharedBranchProblem({ ...shared, runId: 'src' }, { ...shared, inputs: { ...shared.inputs, topic: 'dogs' }, runId: 'fork-1' })).toBeUndefined();
    const own = await side('b', { yaml: git('branch: "feature/{{run.id}}"') });
    expect(findSharedBranchProblem({ ...own, runId: 'src' }, { ...own, runId: 'fork-1' })).toBeUndefined();
    const byDefault = await side('c', { yaml: git('') });
    expect(findSharedBranchProblem({ ...byDefault, runId: 'src' }, { ...byDefault, runId: 'fork-1' })).toBeUndefined();
    // The client refuses it before the fork starts, --dry-run included.
    const started = [{ id: 'stage1', status: 'completed', startedAt: 50, finishedAt: 100 }, { id: 'stage2', status: 'completed', startedAt: 150, finishedAt: 200 }] as StageState[];
    expect(() => previewFork('src', source(shared, started), { runId: 'fork-1', input: source(shared, []).input }, { stage: 'stage2' })).toThrow(/^\[FORK_REFUSED\] the fork's branch would be feature\/cats/);
  });
});
