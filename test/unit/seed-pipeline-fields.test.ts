import { describe, expect, it } from 'vitest';
import { readFreeAnswer } from '../../src/pipeline/contract.js';
import { findBlockedDependents, findReadyStages, needIds } from '../../src/pipeline/graph.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { isTimeoutFailure } from '../../src/pipeline/run-state.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';
import { listTemplateVariables, renderTemplate, TemplateError, type TemplateContext } from '../../src/pipeline/template.js';
import { RunTracker } from '../../src/workflows/run-tracker.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';

/*
 * The pure side of the fields that let the seed systems' pipelines run unchanged (issue 12): free-form answers,
 * passthrough templates, `needs` that allow a failure, `finally` stages, and the run states a tracker reads.
 */

const context: TemplateContext = {
  inputs: { feature: 'dark mode' },
  stages: { test: { summary: 'Tests ran.', outputs: {}, artifacts: [], status: 'failed', error: '3 tests fail' } },
  run: { id: 'run-1', pipeline: 'demo' },
  attempt: 1,
};


describe('contract: none', () => {
  it('takes the last paragraph, trimmed, as the summary and reports no outputs', () => {
    expect(readFreeAnswer('# Plan\n\nStep one.\n\n  Wrote a three-step plan.  \n')).toEqual({
      kind: 'report',
      report: { success: true, summary: 'Wrote a three-step plan.', outputs: {} },
    });
  });

  it('keeps a closing question as the deliverable, but a last paragraph `BLOCKED:` asks a person', () => {
    expect(readFreeAnswer('Here is the copy.\n\nShall we test it next week?')).toMatchObject({ kind: 'report', report: { summary: 'Shall we test it next week?' } });
    expect(readFreeAnswer('I looked.\n\nBLOCKED: which market do we target?')).toEqual({ kind: 'needs_input', question: 'which market do we target?', blocked: true });
  });

  it('treats an empty answer as a violation and caps a huge last paragraph', () => {
    expect(readFreeAnswer('  \n')).toMatchObject({ kind: 'violation' });
    const reading = readFreeAnswer('x'.repeat(5_000));
    expect(reading.kind === 'report' && reading.report.summary.length).toBe(2_000);
  });

  it('cannot be used by a reviewer, whose verdict is in the report block', () => {
    expect(pipelineProblems('name: p\ndefaults: { contract: none }\nstages:\n  - id: a\n    prompt: Do a.\n  - id: r\n    needs: [a]\n    review: { of: a }\n    prompt: Review a.\n')).toEqual([
      'stages[1].review: a reviewer gives its verdict in the report block; set `contract: json` on this stage',
    ]);
  });

  it('is resolved from the stage, else defaults, else json', () => {
    const pipeline = parsePipeline('name: p\ndefaults: { contract: none }\nstages:\n  - id: a\n    prompt: Do a.\n  - id: b\n    contract: json\n    prompt: Do b.\n', 'p.yaml');
    expect(pipeline.stages.map((s) => resolveStage(pipeline, s).contract)).toEqual(['none', 'json']);
    const plain = parsePipeline('name: p\nstages:\n  - id: a\n    prompt: Do a.\n', 'p.yaml');
    expect(resolveStage(plain, plain.stages[0]).contract).toBe('json');
  });
});

describe('templateSyntax and {{raw}}', () => {
  const bmad = 'Project {{project_name}} by {{ user_name }} on {{date}}: build {{inputs.feature}}; tests said {{stages.test.error}}.';

  it('strict (the default) rejects names the run does not define', () => {
    expect(() => renderTemplate(bmad, context, 'step.md')).toThrow(TemplateError);
  });

  it('passthrough hands unknown names to the agent as written and still fills inputs and stages', () => {
    expect(renderTemplate(bmad, context, 'step.md', {}, 'passthrough')).toBe(
      'Project {{project_name}} by {{ user_name }} on {{date}}: build dark mode; tests said 3 tests fail.',
    );
  });

  it('passthrough still rejects unknown names in the namespaces the pipeline fills', () => {
    const err = (() => {
      try {
        renderTemplate('{{inputs.nope}} {{stages.gone.summary}} {{project_name}}', context, 'step.md', {}, 'passthrough');
      } catch (e) {
        return e as TemplateError;
      }
      throw new Error('expected a TemplateError');
    })();
    expect(err.variables).toEqual(['inputs.nope', 'stages.gone.summary']);
  });

  it('{{raw}}…{{/raw}} is copied as written in either mode, and its names are not listed', () => {
    const template = 'Use {{raw}}{{inputs.feature}} and {{.bead.title}}{{/raw}} for {{inputs.feature}}.';
    expect(renderTemplate(template, context, 'x', {}, 'strict')).toBe('Use {{inputs.feature}} and {{.bead.title}} for dark mode.');
    expect(renderTemplate(template, context, 'x', {}, 'passthrough')).toBe('Use {{inputs.feature}} and {{.bead.title}} for dark mode.');
    expect(listTemplateVariables(template)).toEqual(['inputs.feature']);
  });

  it('fills run.status and run.error only where the run has ended', () => {
    expect(renderTemplate('{{run.status}}: {{run.error}}', { ...context, run: { ...context.run, status: 'failed', error: 'boom' } }, 'x')).toBe('failed: boom');
    expect(() => renderTemplate('{{run.status}}', context, 'x', {}, 'passthrough')).toThrow(/run\.status/);
  });

  it('is resolved from the stage, else the pipeline, else strict', () => {
    const pipeline = parsePipeline('name: p\ntemplateSyntax: passthrough\nstages:\n  - id: a\n    prompt: Do a.\n  - id: b\n    templateSyntax: strict\n    prompt: Do b.\n', 'p.yaml');
    expect(pipeline.stages.map((s) => resolveStage(pipeline, s).templateSyntax)).toEqual(['passthrough', 'strict']);
  });
});

describe('needs with allowFailure', () => {
  const stages = [
    { id: 'build' },
    { id: 'test', needs: ['build'] },
    { id: 'fix', needs: [{ stage: 'test', allowFailure: true }] },
    { id: 'verify', needs: ['fix'] },
    { id: 'ship', needs: ['test'] },
    { id: 'notes', needs: ['ship'] },
  ];

  it('lets a stage start when the stage it allows to fail has failed', () => {
    const failed = new Set(['test']);
    const satisfied = (id: string, allowFailure: boolean): boolean => id === 'build' || (allowFailure && failed.has(id));
    const started = new Set(['build', 'test']);
    expect(findReadyStages(stages, (id) => started.has(id), satisfied)).toEqual(['fix']);
    expect(needIds(stages[2])).toEqual(['test']);
  });

  it('blocks only what needs the failed stage without allowing it, and what follows those', () => {
    expect(findBlockedDependents(stages, 'test')).toEqual(['ship', 'notes']);
  });

  it('needs continueOnFailure on the stage allowed to fail, since its failure would end the run first', () => {
    const yaml = (extra: string): string =>
      `name: p\nstages:\n  - id: test\n    prompt: Run the tests.\n${extra}  - id: fix\n    needs: [{ stage: test, allowFailure: true }]\n    prompt: Fix {{stages.test.error}}.\n`;
    expect(pipelineProblems(yaml(''))).toEqual([
      'stages[1].needs[0].allowFailure: stage "fix" allows "test" to fail, but a failure of "test" would end the run first; add `continueOnFailure: true` to stage "test"',
    ]);
    expect(pipelineProblems(yaml('    continueOnFailure: true\n'))).toEqual([]);
  });

  it('a tracked failed stage satisfies only dependents that allow it, and templates read its status and error', () => {
    const pipeline = parsePipeline('name: p\nstages:\n  - id: test\n    continueOnFailure: true\n    prompt: Run them.\n  - id: fix\n    needs: [{ stage: test, allowFailure: true }]\n    prompt: Fix it.\n', 'p.yaml');
    const tracker = new RunTracker('run-1', 'p', {}, pipeline.stages.map((s) => resolveStage(pipeline, s)));
    tracker.markRunning('test', 1);
    tracker.markFailed('test', { type: 'AGENT_REPORTED_FAILURE', message: '3 tests fail' });
    expect([tracker.isSatisfied('test'), tracker.isSatisfied('test', true)]).toEqual([false, true]);
    expect(tracker.templateStages().test).toEqual({ summary: '3 tests fail', outputs: {}, artifacts: [], status: 'failed', error: '3 tests fail' });
  });
});

describe('finally stages', () => {
  const base = 'name: p\nstages:\n  - id: work\n    prompt: Do the work.\n';

  it('are tracked after the stages, marked as finally, and left alone when pending stages are skipped', () => {
    const pipeline = parsePipeline(`${base}finally:\n  - id: record\n    prompt: Record {{run.status}}.\n`, 'p.yaml');
    const tracker = new RunTracker('run-1', 'p', {}, [...pipeline.stages.map((s) => resolveStage(pipeline, s)), ...pipeline.finally!.map((s) => resolveStage(pipeline, s, true))]);
    tracker.skipPending('the run failed');
    expect(tracker.state.stages.map((s) => [s.id, s.status, s.finally ?? false])).toEqual([['work', 'skipped', false], ['record', 'pending', true]]);
    tracker.skipPending('cancelled', true);
    expect(tracker.stage('record').status).toBe('skipped');
  });

  it('need ids of their own, and take no needs, review or when', () => {
    expect(pipelineProblems(`${base}finally:\n  - id: work\n    prompt: Again.\n  - id: tell\n    needs: [work]\n    when: "{{stages.work.outputs.x}}"\n    prompt: Tell.\n`)).toEqual([
      'finally[0].id: duplicate stage id "work"; finally stages need ids of their own',
      'finally[1].needs: finally stages run one after another once the run has ended; remove `needs` (they may read any stage)',
      'finally[1].when: `when` is not supported on finally stages; read {{run.status}} in the prompt instead',
    ]);
  });
});

describe('run states a tracker can use', () => {
  it('is blocked while a question waits, waiting for other waits, running otherwise', () => {
    const pipeline = parsePipeline('name: p\nstages:\n  - id: a\n    prompt: Do a.\n  - id: b\n    prompt: Do b.\n', 'p.yaml');
    const tracker = new RunTracker('run-1', 'p', {}, pipeline.stages.map((s) => resolveStage(pipeline, s)));
    tracker.markRunning('a', 1);
    tracker.markRunning('b', 1);
    tracker.markWaiting('a', { kind: 'approval', message: 'ok?', commands: [], since: 0 });
    expect(tracker.state.status).toBe('waiting');
    tracker.markWaiting('b', { kind: 'answer', message: 'b asks', question: 'Which?', commands: [], since: 0 });
    expect(tracker.state.status).toBe('blocked');
    tracker.markResumed('b');
    expect(tracker.state.status).toBe('waiting');
  });

  it('counts the pipeline timeout and a stage\'s timeouts as timed out, other failures not', () => {
    expect(['PIPELINE_TIMEOUT', 'ACTIVITY_START_TO_CLOSE', 'ACTIVITY_HEARTBEAT', 'AGENT_STALLED'].map(isTimeoutFailure)).toEqual([true, true, true, true]);
    expect(['AGENT_REPORTED_FAILURE', 'OUTPUT_MISSING', 'REJECTED'].map(isTimeoutFailure)).toEqual([false, false, false]);
  });
});

describe('expects and output', () => {
  it('rejects expects entries outside the workspace', () => {
    expect(pipelineProblems('name: p\nstages:\n  - id: a\n    prompt: Do a.\n    expects: [docs/*.md, ../x.md, /etc/passwd]\n')).toEqual([
      'stages[0].expects[1]: "../x.md" is outside the run\'s workspace; use a workspace-relative path or glob such as docs/*.md',
      'stages[0].expects[2]: "/etc/passwd" is outside the run\'s workspace; use a workspace-relative path or glob such as docs/*.md',
    ]);
  });

  it('rejects an output path that leaves the workspace', () => {
    expect(pipelineProblems('name: p\nstages:\n  - id: a\n    backend: anthropic-api\n    prompt: Do a.\n    output: ../{{stage.id}}.md\n')).toEqual([
      'stages[0].output: "../{{stage.id}}.md" leaves the run\'s workspace; the answer is written relative to it, e.g. "outputs/{{stage.id}}.md"',
    ]);
  });

  it('accept optional context and inputs entries', () => {
    const pipeline = parsePipeline(
      'name: p\ncontext: [brief.md, { path: context/product.md, optional: true }]\nstages:\n  - id: a\n    prompt: Do a.\n    inputs: [{ path: docs/x.md, optional: true }]\n    output: "outputs/{{stage.id}}.md"\n',
      'p.yaml',
    );
    expect(pipeline.context).toEqual(['brief.md', { path: 'context/product.md', optional: true }]);
    expect(pipeline.stages[0].inputs).toEqual([{ path: 'docs/x.md', optional: true }]);
  });
});
