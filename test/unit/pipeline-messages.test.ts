import { describe, expect, it } from 'vitest';
import { PipelineValidationError } from '../../src/pipeline/errors.js';
import { describeUnknownChoice } from '../../src/pipeline/issue-messages.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';

/** The problems `parsePipeline` finds in `yaml`, as `path: message`; every case here must have some. */
function problemsOf(yaml: string): string[] {
  const problems = pipelineProblems(yaml);
  if (problems.length === 0) throw new Error('expected the pipeline to be rejected');
  return problems;
}

const stage = (fields: string): string => `name: p\nstages:\n  - id: a\n    prompt: hi\n${fields}\n`;

/*
 * Every enum, number range and duration field of the pipeline file, with a bad value: the message names the
 * value and what is allowed.
 */
const cases: [string, string, string][] = [
  ['backend', stage('    backend: gpt-cli'), 'stages[0].backend: "gpt-cli" is not a backend; use claude-cli or anthropic-api (for a backend registered with the worker, tell the client its name: `backends: [\'gpt-cli\']` or AGENT_PIPELINE_BACKENDS=gpt-cli)'],
  ['permissionMode', stage('    permissionMode: yolo'), 'stages[0].permissionMode: "yolo" is not a permission mode; use default, manual, acceptEdits, dontAsk, bypassPermissions, plan or auto'],
  ['onPermissionDenied', stage('    onPermissionDenied: shrug'), 'stages[0].onPermissionDenied: "shrug" is not a choice for onPermissionDenied; use fail, ask or ignore'],
  ['onFailure', stage('    onFailure: retry'), 'stages[0].onFailure: "retry" is not a choice for onFailure; use fail or ask'],
  ['review.onMaxRounds', stage('    review: { of: a, onMaxRounds: loop }'), 'stages[0].review.onMaxRounds: "loop" is not a choice for onMaxRounds; use ask, fail or continue'],
  ['approval.onTimeout', stage('    approval: { timeout: 1h, onTimeout: maybe }'), 'stages[0].approval.onTimeout: "maybe" is not a choice for onTimeout; use approve or reject'],
  ['onBudgetExceeded', 'name: p\nonBudgetExceeded: pray\nstages:\n  - { id: a, prompt: hi }\n', 'onBudgetExceeded: "pray" is not a choice for onBudgetExceeded; use ask or fail'],
  ['mcp server type', stage('    mcpServers: { s: { type: ftp, url: "http://x" } }'), 'stages[0].mcpServers.s.type: "ftp" is not an MCP server type; use http or sse'],
  ['input type', 'name: p\ninputs:\n  level: { type: number }\nstages:\n  - { id: a, prompt: hi }\n', 'inputs.level.type: "number" is not an input type; use string or object'],
  ['retries', stage('    retries: 200'), 'stages[0].retries: 200 is too large; use a whole number from 0 to 100'],
  ['retries below', 'name: p\ndefaults: { retries: -1 }\nstages:\n  - { id: a, prompt: hi }\n', 'defaults.retries: -1 is too small; use a whole number from 0 to 100'],
  ['retries as text', stage('    retries: three'), 'stages[0].retries: "three" is not a number'],
  ['contractRetries', stage('    contractRetries: 11'), 'stages[0].contractRetries: 11 is too large; use a whole number from 0 to 10'],
  ['maxContinuations', stage('    maxContinuations: 50'), 'stages[0].maxContinuations: 50 is too large; use a whole number from 0 to 10'],
  ['maxTokens', stage('    maxTokens: 0'), 'stages[0].maxTokens: 0 is too small; use a whole number above 0'],
  ['maxTokens fraction', stage('    maxTokens: 1.5'), 'stages[0].maxTokens: 1.5 is not a whole number; use a whole number above 0'],
  ['maxBudgetUsd', stage('    maxBudgetUsd: -2'), 'stages[0].maxBudgetUsd: -2 is too small; use a number above 0'],
  ['budgetUsd', 'name: p\nbudgetUsd: 0\nstages:\n  - { id: a, prompt: hi }\n', 'budgetUsd: 0 is too small; use a number above 0'],
  ['concurrency', 'name: p\nconcurrency: 0\nstages:\n  - { id: a, prompt: hi }\n', 'concurrency: 0 is too small; use a whole number of at least 1'],
  ['review.maxRounds', stage('    review: { of: a, maxRounds: 99 }'), 'stages[0].review.maxRounds: 99 is too large; use a whole number from 1 to 20'],
  ['timeout', stage('    timeout: 30 minutes'), 'stages[0].timeout: "30 minutes" is not a duration; use a string such as "90s", "30m", "2h" or "1d", or a whole number of milliseconds above 0'],
  ['heartbeatTimeout', 'name: p\ndefaults: { heartbeatTimeout: -5 }\nstages:\n  - { id: a, prompt: hi }\n', 'defaults.heartbeatTimeout: -5 is not a duration; use a string such as "90s", "30m", "2h" or "1d", or a whole number of milliseconds above 0'],
  ['stallTimeout', stage('    stallTimeout: true'), 'stages[0].stallTimeout: true is not a duration; use a string such as "90s", "30m", "2h" or "1d", or a whole number of milliseconds above 0'],
  ['firstOutputTimeout', stage('    firstOutputTimeout: 5 min'), 'stages[0].firstOutputTimeout: "5 min" is not a duration; use a string such as "90s", "30m", "2h" or "1d", or a whole number of milliseconds above 0'],
  ['run timeout', 'name: p\ntimeout: forever\nstages:\n  - { id: a, prompt: hi }\n', 'timeout: "forever" is not a duration; use a string such as "90s", "30m", "2h" or "1d", or a whole number of milliseconds above 0'],
  ['approval.timeout', stage('    approval: { timeout: soon }'), 'stages[0].approval.timeout: "soon" is not a duration; use a string such as "90s", "30m", "2h" or "1d", or a whole number of milliseconds above 0'],
  ['approval itself', stage('    approval: yes please'), 'stages[0].approval: "yes please" is not valid here; expected true or an object'],
  ['stage input', stage('    inputs: [5]'), 'stages[0].inputs[0]: 5 is not valid here; expected a string or an object'],
  // A list written as one value: the message gives the list to write instead.
  ['needs as one id', stage('    needs: spec'), 'stages[0].needs: "spec" is not a list; write `needs: [spec]`'],
  ['needs as ids with commas', stage('    needs: spec, plan'), 'stages[0].needs: "spec, plan" is not a list; write `needs: [spec, plan]`'],
  ['allowedTools as one tool', stage('    allowedTools: Bash(npm test:*)'), 'stages[0].allowedTools: "Bash(npm test:*)" is not a list; write `allowedTools: ["Bash(npm test:*)"]`'],
  ['context as one file', 'name: p\ncontext: docs/brief.md\nstages:\n  - { id: a, prompt: hi }\n', 'context: "docs/brief.md" is not a list; write `context: [docs/brief.md]`'],
  ['stages as text', 'name: p\nstages: all of them\n', 'stages: "all of them" is not a list; write a list: `stages: [ITEM, ...]`, or one item a line, each after "- "'],
  ['stage id', 'name: p\nstages:\n  - { id: 2nd, prompt: hi }\n', 'stages[0].id: "2nd" is not valid: expected an identifier: a letter, then letters, digits, "-" or "_"'],
];

describe('a rejected value is named with what is allowed', () => {
  it.each(cases)('%s', (_field, yaml, expected) => {
    const problems = problemsOf(yaml);
    expect(problems, problems.join("\n")).toContain(expected);
  });
});

describe('YAML the parser cannot read', () => {
  it('an alias bomb is a PipelineValidationError naming the file, not a crash', () => {
    const bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]', ...'bcdefghi'.split('').map((k, i) => `${k}: &${k} [${Array(9).fill(`*${'abcdefghi'[i]}`).join(',')}]`), 'name: p', 'stages: []'].join('\n');
    expect(() => parsePipeline(bomb, 'bomb.yaml')).toThrow(PipelineValidationError);
    expect(() => parsePipeline(bomb, 'bomb.yaml')).toThrow(/^\[PIPELINE_INVALID\] bomb\.yaml is not a valid pipeline:\n {2}bomb\.yaml \(document\): the YAML cannot be read: .*alias/i);
  });
});

describe('paths that leave their folder', () => {
  it('stage inputs outside the workspace and context files outside the pipeline folder are reported with their field', () => {
    const yaml = [
      'name: p',
      'context: [docs/brief.md, ../shared/brief.md, /etc/passwd]',
      'stages:',
      '  - id: a',
      '    prompt: hi',
      '    inputs: [docs/spec.md, ./out/../notes.md, ../other-run/secret.txt, { path: /tmp/x, from: a }, "~/notes"]',
    ].join('\n');
    expect(problemsOf(yaml)).toEqual([
      `context[1]: "../shared/brief.md" leaves the pipeline file's folder; context files are read relative to it, so keep them in that folder or below it`,
      `context[2]: "/etc/passwd" leaves the pipeline file's folder; context files are read relative to it, so keep them in that folder or below it`,
      `stages[0].inputs[2]: "../other-run/secret.txt" leaves the run's workspace; stage inputs are files earlier stages wrote in it, given relative to it (e.g. "docs/spec.md")`,
      `stages[0].inputs[3].path: "/tmp/x" leaves the run's workspace; stage inputs are files earlier stages wrote in it, given relative to it (e.g. "docs/spec.md")`,
      `stages[0].inputs[4]: "~/notes" leaves the run's workspace; stage inputs are files earlier stages wrote in it, given relative to it (e.g. "docs/spec.md")`,
    ]);
  });
});

describe('a file that is not a pipeline at all', () => {
  it('empty, or a list instead of a mapping, says so', () => {
    expect(problemsOf('')).toEqual([': the file is empty; a pipeline needs at least `name` and `stages`']);
    expect(problemsOf('# only a comment\n')).toEqual([': the file is empty; a pipeline needs at least `name` and `stages`']);
    expect(problemsOf('- a\n- b\n')).toEqual([': a list is not an object']);
  });
});

describe('describeUnknownChoice', () => {
  it('builds the message from the list it is given, so a longer list of backends reads the same', () => {
    expect(describeUnknownChoice('backend', 'gpt-cli', ['claude-cli', 'anthropic-api', 'my-backend'])).toBe('"gpt-cli" is not a backend; use claude-cli, anthropic-api or my-backend');
    expect(describeUnknownChoice('colour', 7, ['red'])).toBe('7 is not a valid colour; use red');
  });
});
