import { describe, expect, it } from 'vitest';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';

const problemsOf = (text: string): string[] => pipelineProblems(text, { withLine: true });

describe('parsePipeline', () => {
  it('accepts the documented pipeline shape and keeps what the author wrote', () => {
    const pipeline = parsePipeline(
      [
        'name: feature-delivery',
        'inputs: { feature: { required: true } }',
        'defaults: { backend: claude-cli, model: sonnet, timeout: 30m, heartbeatTimeout: 2m, retries: 3 }',
        'budgetUsd: 5',
        'stages:',
        '  - id: spec',
        '    prompt: steps/spec.md',
        '  - id: review',
        '    needs: [spec]',
        '    backend: anthropic-api',
        '    model: opus',
        '    agent: agents/reviewer.md',
        '    review: { of: spec, maxRounds: 2 }',
        '  - id: release',
        '    needs: [review]',
        '    approval: { timeout: 24h }',
      ].join('\n'),
      'p.yaml',
    );
    expect(pipeline.name).toBe('feature-delivery');
    expect(pipeline.stages[1]).toMatchObject({ id: 'review', needs: ['spec'], review: { of: 'spec', maxRounds: 2 } });
    expect(resolveStage(pipeline, pipeline.stages[2])).toMatchObject({ id: 'release', gateOnly: true, prompt: '' });
  });

  it('names the line and YAML path of a wrong field', () => {
    const problems = problemsOf(['name: p', 'stages:', '  - id: a', '    prompt: x', '    timeout: soon'].join('\n'));
    expect(problems).toEqual([expect.stringMatching(/^5 stages\[0\]\.timeout: .*duration/)]);
  });

  it('reports unknown fields instead of ignoring them', () => {
    const problems = problemsOf(['name: p', 'stages:', '  - id: a', '    prompt: x', '    colour: y'].join('\n'));
    expect(problems).toEqual(['5 stages[0]: unknown field "colour"']);
  });

  it('reports an unknown stage field at its own line and suggests the field it is near', () => {
    const problems = problemsOf(['name: p', 'stages:', '  - id: a', '    model: opus', '    promt: y', '    timeuot: 5m'].join('\n'));
    expect(problems).toEqual([
      expect.stringMatching(/^3 stages\[0\]\.prompt: /),
      '5 stages[0]: unknown field "promt"; did you mean "prompt"?',
      '6 stages[0]: unknown field "timeuot"; did you mean "timeout"?',
    ]);
  });

  it('reports an unknown top-level field at its own line and suggests the field it is near', () => {
    const problems = problemsOf(['name: p', 'stages:', '  - id: a', '    prompt: x', 'defualts:', '  model: opus'].join('\n'));
    expect(problems).toEqual(['5 : unknown field "defualts"; did you mean "defaults"?']);
  });

  it('says where the link to the JSON Schema goes when a pipeline has a $schema field, as a JSON file would', () => {
    const problems = problemsOf(['$schema: ./pipeline.schema.json', 'name: p', 'stages:', '  - id: a', '    prompt: x'].join('\n'));
    expect(problems).toEqual([expect.stringMatching(/^1 : unknown field "\$schema"; link the JSON Schema with a comment on the first line instead: # yaml-language-server: \$schema=/)]);
  });

  it('says where a field of another level goes: a stage option at the top, a pipeline field on a stage', () => {
    const problems = problemsOf(['name: p', 'model: opus', 'stages:', '  - id: a', '    prompt: x', '    budgetUsd: 2'].join('\n'));
    expect(problems).toEqual([
      '2 : unknown field "model"; "model" is a stage option: put it under `defaults:` for every stage, or on the stages that need it',
      '6 stages[0]: unknown field "budgetUsd"; "budgetUsd" is a field of the whole pipeline: put it at the top level; a stage\'s own spending cap is `maxBudgetUsd`',
    ]);
  });

  it('reports an unknown field of a nested block at its own line and suggests the field it is near', () => {
    const problems = problemsOf(['name: p', 'stages:', '  - id: a', '    prompt: x', '    approval:', '      timeout: 1h', '      onTimout: reject'].join('\n'));
    expect(problems).toEqual(['7 stages[0].approval: unknown field "onTimout"; did you mean "onTimeout"?']);
  });

  it('reports a missing required field at its parent', () => {
    expect(problemsOf(['name: p', 'stages:', '  - id: a'].join('\n'))).toEqual([
      expect.stringMatching(/^3 stages\[0\]\.prompt: a stage needs a `prompt` or an `agent`/),
    ]);
    expect(problemsOf(['name: p', 'stages: []'].join('\n'))).toEqual([expect.stringContaining('at least one stage')]);
  });

  it('rejects needs on unknown stages, duplicates and cycles', () => {
    expect(problemsOf(['name: p', 'stages:', '  - { id: a, prompt: x, needs: [b] }'].join('\n'))).toEqual([
      expect.stringContaining('stages[0].needs[0]: unknown stage "b"'),
    ]);
    expect(problemsOf(['name: p', 'stages:', '  - { id: a, prompt: x }', '  - { id: a, prompt: y }'].join('\n'))).toEqual([
      expect.stringContaining('stages[1].id: duplicate stage id "a"'),
    ]);
    expect(
      problemsOf(['name: p', 'stages:', '  - { id: a, prompt: x, needs: [b] }', '  - { id: b, prompt: y, needs: [a] }'].join('\n')),
    ).toEqual([expect.stringContaining('dependency cycle: a -> b -> a')]);
  });

  it('reports YAML syntax errors with their line', () => {
    expect(problemsOf('name: p\nstages: [\n')[0]).toMatch(/^\d+ : /);
  });

  it('puts the file name in the message', () => {
    expect(() => parsePipeline('name: 3x', 'pipelines/bad.yaml')).toThrow(/pipelines\/bad\.yaml/);
  });
});

describe('resolveStage', () => {
  it('takes stage values over pipeline defaults over built-ins', () => {
    const pipeline = parsePipeline(
      ['name: p', 'defaults: { model: opus, timeout: 10m, retries: 5 }', 'stages:', '  - { id: a, prompt: x, timeout: 90s }'].join('\n'),
      'p.yaml',
    );
    const stage = resolveStage(pipeline, pipeline.stages[0]);
    expect(stage).toMatchObject({ backend: 'claude-cli', model: 'opus', timeoutMs: 90_000, retries: 5, heartbeatTimeoutMs: 120_000, needs: [] });
  });
});
