import { describe, expect, it } from 'vitest';
import { readAgentOutput, readFreeAnswer } from '../../src/pipeline/contract.js';
import { findOversizedField, OUTPUT_CAPS } from '../../src/pipeline/output-caps.js';
import { formatObjectInput, parseObjectInput } from '../../src/pipeline/object-inputs.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { temporalRetryPolicy } from '../../src/pipeline/retry-policy.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';
import { renderTemplate, type TemplateContext } from '../../src/pipeline/template.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';

describe('retry policy in the file', () => {
  it('merges a stage\'s `retry` over the defaults\' field by field and maps it onto Temporal\'s policy', () => {
    const pipeline = parsePipeline(
      'name: p\ndefaults: { retries: 2, retry: { initialInterval: 5s, nonRetryable: [RESPONSE_EMPTY, CLI_CRASHED] } }\nstages:\n  - { id: a, prompt: x, retry: { backoffCoefficient: 1.5, maximumInterval: 2m } }\n  - { id: b, prompt: x }\n',
      'p.yaml',
    );
    const a = resolveStage(pipeline, pipeline.stages[0]);
    expect(temporalRetryPolicy(a.retries, a.retry)).toEqual({
      maximumAttempts: 3,
      initialInterval: 5_000,
      backoffCoefficient: 1.5,
      maximumInterval: 120_000,
      nonRetryableErrorTypes: ['RESPONSE_EMPTY', 'CLI_CRASHED'],
    });
    // Without `retry` anywhere: the policy every stage had before (1 s, ×2, up to 1 m).
    const plain = parsePipeline('name: p\nstages:\n  - { id: a, prompt: x }\n', 'p.yaml');
    expect(temporalRetryPolicy(3, resolveStage(plain, plain.stages[0]).retry)).toEqual({ maximumAttempts: 4, initialInterval: 1_000, backoffCoefficient: 2, maximumInterval: 60_000 });
  });

  it('names the field and lists the allowed failure types for an unknown one', () => {
    const [problem] = pipelineProblems('name: p\nstages:\n  - { id: a, prompt: x, retry: { nonRetryable: [EMPTY_ANSWER] } }\n');
    expect(problem).toMatch(/^stages\[0\]\.retry\.nonRetryable\[0\]: "EMPTY_ANSWER" is not a failure type; use CONFIG_INVALID, .*RESPONSE_EMPTY.* or INTERNAL_ERROR$/);
  });

  it('takes onBlocked wait or fail, per stage over the default', () => {
    const pipeline = parsePipeline('name: p\ndefaults: { onBlocked: fail }\nstages:\n  - { id: a, prompt: x }\n  - { id: b, prompt: x, onBlocked: wait }\n', 'p.yaml');
    expect(pipeline.stages.map((s) => resolveStage(pipeline, s).onBlocked)).toEqual(['fail', 'wait']);
    expect(pipelineProblems('name: p\nstages:\n  - { id: a, prompt: x, onBlocked: stop }\n')).toEqual(['stages[0].onBlocked: "stop" is not a choice for onBlocked; use wait or fail']);
  });
});

describe('the agent\'s answer and report', () => {
  it('tells a BLOCKED line from a closing question', () => {
    expect(readAgentOutput('Looked around.\nBLOCKED: no key')).toEqual({ kind: 'needs_input', question: 'no key', blocked: true });
    expect(readAgentOutput('Which database should I use?')).toEqual({ kind: 'needs_input', question: 'Which database should I use?', blocked: false });
    expect(readFreeAnswer('Done some.\n\nBLOCKED: no key')).toMatchObject({ blocked: true });
  });

  it('keeps every top-level report field besides the contract\'s, and caps them like outputs', () => {
    const reading = readAgentOutput('```json\n{"success": true, "summary": "s", "outputs": {"a": 1}, "issues": [{"title": "t"}], "pr_ready": false}\n```');
    expect(reading).toEqual({ kind: 'report', report: { success: true, summary: 's', outputs: { a: 1 } }, extra: { issues: [{ title: 't' }], pr_ready: false } });
    expect(readAgentOutput('```json\n{"success": true, "summary": "s"}\n```')).not.toHaveProperty('extra');
    const big = 'x'.repeat(OUTPUT_CAPS.reportFieldBytes + 1);
    expect(findOversizedField({ outputs: {} }, { notes: big })).toMatchObject({ field: 'notes', limit: OUTPUT_CAPS.reportFieldBytes });
  });
});

describe('template values', () => {
  const context = (run: TemplateContext['run'], extra: Partial<TemplateContext> = {}): TemplateContext => ({ inputs: {}, stages: {}, run, attempt: 1, ...extra });

  it('gives finally stages run.error.type and run.error.message beside run.error', () => {
    const ended = context({ id: 'r', pipeline: 'p', status: 'failed', error: 'stuck', errorType: 'AGENT_BLOCKED' });
    expect(renderTemplate('{{run.status}} {{run.error.type}} {{run.error.message}} {{run.error}}', ended, 't')).toBe('failed AGENT_BLOCKED stuck stuck');
    const completed = context({ id: 'r', pipeline: 'p', status: 'completed', error: '', errorType: '' });
    expect(renderTemplate('[{{run.error.type}}]', completed, 't')).toBe('[]');
    expect(() => renderTemplate('{{run.error.type}}', context({ id: 'r', pipeline: 'p' }), 't')).toThrow(/TEMPLATE_VARIABLE_UNKNOWN/);
  });

  it('reads stages.ID.answer and stages.ID.report.FIELD', () => {
    const stages = { review: { summary: 's', outputs: {}, artifacts: [], answer: 'All good.', report: { issues: ['a', 'b'] } } };
    expect(renderTemplate('{{stages.review.answer}}|{{stages.review.report.issues}}', context({ id: 'r', pipeline: 'p' }, { stages }), 't')).toBe('All good.|a\nb');
  });

  it('renders an object input as key-value lines, and one key by name', () => {
    const ctx = context({ id: 'r', pipeline: 'p' }, { inputs: { e: '{"scope":"prose","n":2}' }, objectInputs: ['e'] });
    expect(renderTemplate('{{inputs.e}}|{{inputs.e.scope}}', ctx, 't')).toBe('scope: prose\nn: 2|prose');
    expect(() => renderTemplate('{{inputs.e.missing}}', ctx, 't')).toThrow(/inputs\.e\.missing.*Defined: inputs\.e, inputs\.e\.scope, inputs\.e\.n/);
  });
});

describe('object inputs', () => {
  it('takes one level of string, number and boolean values', () => {
    expect(parseObjectInput('{"a": "x", "b": 1, "c": false}')).toEqual({ value: { a: 'x', b: 1, c: false } });
    expect(parseObjectInput('[1]')).toEqual({ problem: 'expected a JSON object such as {"key": "value"}, got an array' });
    expect(parseObjectInput('{"a": [1]}')).toEqual({ problem: 'key "a": its value must be a string, number or boolean (no nested objects or lists)' });
    expect('problem' in parseObjectInput('{"a": ')).toBe(true);
    expect(formatObjectInput({ a: 'x', b: 1 }, '  ')).toBe('  a: x\n  b: 1');
  });

  it('checks that an input\'s default matches its type', () => {
    expect(pipelineProblems('name: p\ninputs:\n  e: { type: object, default: "x" }\nstages:\n  - { id: a, prompt: x }\n')[0]).toMatch(/inputs\.e\.default: input "e" is `type: object`/);
    expect(pipelineProblems('name: p\ninputs:\n  e: { type: object, default: { a: 1 } }\nstages:\n  - { id: a, prompt: x }\n')).toEqual([]);
  });
});

describe('report fields in `when:`', () => {
  it('reads {{stages.ID.report.FIELD}} like an output', async () => {
    const { evaluateCondition, parseCondition } = await import('../../src/pipeline/condition.js');
    const context = { inputs: {}, stages: { review: { status: 'completed', summary: '', outputs: {}, report: { pr_ready: false, issues: [{ title: 't' }] } } } };
    expect(evaluateCondition(parseCondition('{{stages.review.report.pr_ready}} == false && {{stages.review.report.issues}}'), context)).toBe(true);
    expect(evaluateCondition(parseCondition('{{stages.review.report.missing}}'), context)).toBe(false);
  });
});

describe('the workflow\'s own check of object inputs', () => {
  it('refuses a run whose object input is not a JSON object of scalars, naming the input', async () => {
    const { findRunInputProblems, RUN_INPUT_VERSION } = await import('../../src/pipeline/run-input.js');
    const input = (value: string) => ({
      version: RUN_INPUT_VERSION,
      pipeline: { name: 'p', inputs: { e: { type: 'object' } }, stages: [{ id: 'a', prompt: 'x' }] },
      baseDir: '/tmp/p',
      pipelineFile: 'p.yaml',
      inputs: { e: value },
    });
    expect(findRunInputProblems(input('{"a": "b"}'))).toEqual([]);
    expect(findRunInputProblems(input('{"a": {"b": 1}}'))).toEqual([{ path: 'inputs.e', message: 'input "e" is `type: object`, but key "a": its value must be a string, number or boolean (no nested objects or lists)' }]);
  });
});
