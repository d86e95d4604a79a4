import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createRunBundle } from '../../src/bundle/create-run-bundle.js';
import { loadPipelineFile } from '../../src/library/load-pipeline.js';
import { describeRefusals, forkStart, planFork, rerunFrom, type ForkSide, type ForkSourceStage } from '../../src/pipeline/fork-plan.js';

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
});
