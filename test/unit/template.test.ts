import { describe, expect, it } from 'vitest';
import { listTemplateVariables, renderTemplate, TemplateError, type TemplateContext } from '../../src/pipeline/template.js';

const context: TemplateContext = {
  inputs: { feature: 'dark mode' },
  stages: {
    spec: { summary: 'Wrote the spec.', outputs: { title: 'Dark mode', count: 2, flags: { a: true } }, artifacts: ['docs/spec.md', 'docs/notes.md'] },
  },
  run: { id: 'run-1', pipeline: 'demo' },
  attempt: 2,
  previous: { failed: '[AGENT_STALLED] stage x: no output' },
};

function errorOf(fn: () => unknown): TemplateError {
  try {
    fn();
  } catch (err) {
    if (err instanceof TemplateError) return err;
    throw err;
  }
  throw new Error('expected a TemplateError');
}

describe('renderTemplate', () => {
  it('fills inputs, earlier stages, the run, the attempt and the previous failure', () => {
    const out = renderTemplate(
      [
        'Build {{inputs.feature}} for run {{run.id}} of {{ run.pipeline }}, attempt {{attempt}}.',
        'Spec: {{stages.spec.summary}} / {{stages.spec.outputs.title}} / {{stages.spec.outputs.count}}',
        'Files:',
        '{{stages.spec.artifacts}}',
        'Last time: {{previous.failed}}',
      ].join('\n'),
      context,
      'steps/x.md',
    );
    expect(out).toBe(
      [
        'Build dark mode for run run-1 of demo, attempt 2.',
        'Spec: Wrote the spec. / Dark mode / 2',
        'Files:',
        'docs/spec.md\ndocs/notes.md',
        'Last time: [AGENT_STALLED] stage x: no output',
      ].join('\n'),
    );
  });

  it('renders objects as JSON and an empty previous failure as an empty string', () => {
    const first = { ...context, attempt: 1, previous: { failed: '' } };
    expect(renderTemplate('{{stages.spec.outputs.flags}}|{{previous.failed}}|', first, 't')).toBe('{\n  "a": true\n}||');
  });

  it('names the template and every unknown variable instead of rendering empty strings', () => {
    const err = errorOf(() => renderTemplate('{{inputs.featur}} {{stages.spec.outputs.titel}} {{inputs.featur}}', context, 'steps/spec.md'));
    expect(err.template).toBe('steps/spec.md');
    expect(err.variables).toEqual(['inputs.featur', 'stages.spec.outputs.titel']);
    expect(err.message).toContain('steps/spec.md uses {{inputs.featur}}, {{stages.spec.outputs.titel}}');
    expect(err.message).toContain('stages.spec.outputs.title');
  });

  it('says when a stage a template refers to has not completed before it', () => {
    const err = errorOf(() => renderTemplate('{{stages.plan.summary}}', context, 'stage build prompt (inline)'));
    expect(err.message).toContain('stage "plan" has not completed before this one; list it under `needs`');
  });

  it('knows {{previous.failed}} only where an attempt is rendered', () => {
    const { previous: _previous, ...noAttempt } = context;
    expect(errorOf(() => renderTemplate('{{previous.failed}}', noAttempt, 'when')).variables).toEqual(['previous.failed']);
  });

  it('renders multi-line inline templates and does not render inserted values again', () => {
    const tricky = { ...context, inputs: { feature: 'uses {{run.id}} literally' } };
    expect(renderTemplate('Line one\n  {{inputs.feature}}\nLine three', tricky, 'inline')).toBe('Line one\n  uses {{run.id}} literally\nLine three');
  });

  it('takes extra variables by full name', () => {
    expect(renderTemplate('<{{stage_prompt}}> {{stage.id}}', context, 'system', { stage_prompt: 'task', 'stage.id': 'spec' })).toBe('<task> spec');
  });
});

describe('listTemplateVariables', () => {
  it('lists each variable once, in order of first use', () => {
    expect(listTemplateVariables('{{a.b}} {{ c }} {{a.b}}')).toEqual(['a.b', 'c']);
  });
});
