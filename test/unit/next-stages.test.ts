import { describe, expect, it } from 'vitest';
import { stagesReadyAfter } from '../../src/pipeline/next-stages.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';

const yaml = [
  'name: p',
  'stages:',
  '  - { id: spec, prompt: x }',
  '  - { id: plan, prompt: x }',
  '  - { id: build, needs: [spec], prompt: x }',
  '  - { id: docs, needs: [spec, plan], prompt: x }',
  '  - { id: maybe, needs: [spec], prompt: x, when: "{{stages.spec.outputs.ok}} == true" }',
  '  - { id: gate, needs: [spec] }',
  '  - { id: approved, needs: [spec], prompt: x, approval: true }',
  '  - { id: ship, needs: [build], prompt: x }',
  '  - { id: signed, needs: [plan], prompt: x, approval: true }',
  '  - { id: after, needs: [signed], prompt: x }',
].join('\n').replace('  - { id: gate, needs: [spec] }', '  - { id: gate, needs: [spec], approval: true }');
const pipeline = parsePipeline(yaml, 'p.yaml');
const stages = pipeline.stages.map((s) => resolveStage(pipeline, s));
const ids = (list: { id: string }[]): string[] => list.map((s) => s.id);

describe('stagesReadyAfter (warm start hints)', () => {
  it('names the stages whose last missing need is the finishing stage, leaving out conditional and gated ones', () => {
    const started = new Set(['spec', 'plan']);
    expect(ids(stagesReadyAfter(stages, 'spec', (id) => started.has(id), () => false))).toEqual(['build']);
    // Once plan is done, docs waits only for spec.
    expect(ids(stagesReadyAfter(stages, 'spec', (id) => started.has(id), (id) => id === 'plan'))).toEqual(['build', 'docs']);
  });

  it('leaves out stages already started, and hints nothing after a stage that waits for an approval', () => {
    expect(ids(stagesReadyAfter(stages, 'build', (id) => id !== 'ship', () => true))).toEqual(['ship']);
    expect(ids(stagesReadyAfter(stages, 'build', () => true, () => true))).toEqual([]);
    expect(ids(stagesReadyAfter(stages, 'signed', () => false, () => true))).toEqual([]);
    expect(ids(stagesReadyAfter(stages, 'unknown', () => false, () => true))).toEqual([]);
  });
});
