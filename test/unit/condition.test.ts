import { describe, expect, test } from 'vitest';
import { ConditionSyntaxError, evaluateCondition, isTruthy, listConditionReferences, parseCondition, type ConditionContext } from '../../src/pipeline/condition.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { PipelineValidationError } from '../../src/pipeline/errors.js';

const context: ConditionContext = {
  inputs: { mode: 'fast', retries: '3' },
  stages: {
    test: { status: 'completed', summary: 'two tests failed', outputs: { passed: false, failures: 2, report: { ok: false }, tags: [] } },
    lint: { status: 'completed', summary: 'clean', outputs: { passed: 'true' } },
    flaky: { status: 'failed' },
  },
};
const holds = (expression: string): boolean => evaluateCondition(parseCondition(expression), context);

describe('when: conditions', () => {
  test('compare outputs with literals the way JSON and YAML authors expect', () => {
    expect(holds('{{stages.test.outputs.passed}} == false')).toBe(true);
    expect(holds('{{stages.test.outputs.passed}} != false')).toBe(false);
    expect(holds('{{stages.lint.outputs.passed}} == true')).toBe(true);
    expect(holds('{{stages.test.outputs.failures}} == 2')).toBe(true);
    expect(holds('{{inputs.retries}} == 3')).toBe(true);
    expect(holds("{{inputs.mode}} == 'fast'")).toBe(true);
    expect(holds('{{stages.flaky.status}} == "failed"')).toBe(true);
  });

  test('a lone reference is tested for truthiness, and missing values read as null', () => {
    expect(holds('{{stages.test.outputs.passed}}')).toBe(false);
    expect(holds('!{{stages.test.outputs.passed}}')).toBe(true);
    expect(holds('{{stages.test.outputs.tags}}')).toBe(false);
    expect(holds('{{stages.test.summary}}')).toBe(true);
    expect(holds('{{stages.nothere.outputs.x}} == null')).toBe(true);
    expect(holds('{{stages.test.outputs.missing}}')).toBe(false);
  });

  test('combine with && and || and parentheses', () => {
    expect(holds('{{stages.test.outputs.passed}} == false && {{inputs.mode}} == "fast"')).toBe(true);
    expect(holds('{{stages.lint.outputs.passed}} == false || {{stages.test.outputs.failures}} == 2')).toBe(true);
    expect(holds('!({{stages.test.outputs.failures}} == 2 || false)')).toBe(false);
  });

  test('lists the references it reads', () => {
    expect(listConditionReferences(parseCondition('{{stages.a.outputs.x}} == {{inputs.y}} || !{{stages.b.status}}'))).toEqual([
      ['stages', 'a', 'outputs', 'x'],
      ['inputs', 'y'],
      ['stages', 'b', 'status'],
    ]);
  });

  test.each([
    ['', 'empty condition'],
    ['{{stages.test.outputs.passed}} == flase', 'unquoted word `flase`'],
    ['{{stages.test.outputs.passed}} = false', 'unexpected `= false`'],
    ['{{stages.test}} == true', 'cannot refer to {{stages.test}}'],
    ['{{a}} == {{b}} == {{c}}', 'cannot refer to {{a}}'],
    ['true == false == true', 'chained comparisons need parentheses'],
    ['(true', 'expected ")"'],
    ['true false', 'unexpected `false`'],
  ])('rejects %j with a message saying what is wrong', (expression, message) => {
    expect(() => parseCondition(expression)).toThrow(ConditionSyntaxError);
    expect(() => parseCondition(expression)).toThrow(message);
  });

  test('truthiness treats the strings "false" and "0" as false', () => {
    expect([isTruthy('false'), isTruthy('0'), isTruthy(''), isTruthy(0), isTruthy(null), isTruthy('no')]).toEqual([false, false, false, false, false, true]);
  });
});

describe('loading a pipeline with when: conditions', () => {
  const pipeline = (when: string): string =>
    ['name: p', 'inputs: { mode: {} }', 'stages:', '  - id: test', '    prompt: run tests', '  - id: fix', '    needs: [test]', '    prompt: fix', `    when: ${JSON.stringify(when)}`].join('\n');

  test('accepts a condition on an earlier stage', () => {
    expect(parsePipeline(pipeline('{{stages.test.outputs.passed}} == false'), 'p.yaml').stages[1].when).toContain('passed');
  });

  test.each([
    ['{{stages.test.outputs.passed}} == nope', 'p.yaml:9:11 stages[1].when: invalid condition: unquoted word `nope`'],
    ['{{stages.fix.outputs.passed}}', 'reads stage "fix", which stage "fix" does not run after'],
    ['{{inputs.other}} == "x"', 'reads {{inputs.other}}, which the pipeline does not declare; declared inputs: mode'],
  ])('rejects %j at load time', (when, message) => {
    expect(() => parsePipeline(pipeline(when), 'p.yaml')).toThrow(PipelineValidationError);
    expect(() => parsePipeline(pipeline(when), 'p.yaml')).toThrow(message);
  });
});
