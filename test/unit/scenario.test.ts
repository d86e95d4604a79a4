import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { loadScenario, parseScenario, ScenarioValidationError, validateScenario } from '../../src/dev/scenario.js';
import { selectTurn } from '../../src/dev/scenario-match.js';
import { textChunks } from '../../src/dev/model-reply.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

function issuesOf(text: string): ScenarioValidationError {
  try {
    parseScenario(text, 'scenario.yaml');
  } catch (error) {
    if (error instanceof ScenarioValidationError) return error;
    throw error;
  }
  throw new Error('expected the scenario to be rejected');
}

describe('a request no rule matches', () => {
  test('shows the prompt, not the system reminders Claude Code puts before it', () => {
    const scenario = parseScenario('rules:\n  - match: "Stage: spec ·"\n    turns: [{ text: hi }]\n', 'scenario.yaml');
    const reminder = `<system-reminder>\nAttribution for git commits and pull requests ${'you create from here on '.repeat(8)}\n</system-reminder>`;
    const selection = selectTurn(scenario, [{ role: 'user', content: [{ type: 'text', text: reminder }, { type: 'text', text: 'Stage: hello · Say hello to the reader.' }] }]);
    expect(selection).toMatchObject({ kind: 'no-match', message: expect.stringContaining('(first user message: "Stage: hello · Say hello to the reader.")') });
  });
});

describe('parseScenario', () => {
  test('accepts the scenario docs/testing.md shows', () => {
    const docs = readFileSync(join(PROJECT_ROOT, 'docs', 'testing.md'), 'utf8');
    const block = /## The scenario file\n\n```yaml\n([\s\S]*?)\n```\n/.exec(docs)?.[1];
    expect(block).toBeDefined();
    expect(parseScenario(block ?? '', 'docs/testing.md').rules[0].turns).toHaveLength(2);
  });

  test('accepts the documented format and applies defaults', () => {
    const scenario = parseScenario(
      [
        'rules:',
        '  - match: "Stage: implement"',
        '    turns:',
        '      - tool: { name: Bash, input: { command: "echo hi" } }',
        '        text: "I will run it."',
        '      - text: "Done."',
        '        usage: { input_tokens: 1200, output_tokens: 300 }',
        '        failFirst:',
        '          - { status: 529, type: overloaded_error, message: "Overloaded" }',
        '          - { status: 429, retryAfter: 2 }',
        '  - match: { regex: "Stage: rev.*" }',
        '    repeatLastTurn: true',
        '    turns: [ { text: "ok", repeat: 3, chunks: 2 } ]',
      ].join('\n'),
      'scenario.yaml',
    );
    expect(scenario.fallback).toBe('error');
    expect(scenario.rules[0].repeatLastTurn).toBe(false);
    expect(scenario.rules[0].turns[1].failFirst?.[1]).toEqual({ status: 429, retryAfter: 2 });
    expect(scenario.rules[1].match).toEqual({ regex: 'Stage: rev.*' });
  });

  test('names the file, the YAML path and the line of each schema error', () => {
    const error = issuesOf(
      ['rules:', '  - match: "x"', '    turns:', '      - text: hi', '        repeat: 0', '      - tool: { input: {} }'].join('\n'),
    );
    expect(error.fileName).toBe('scenario.yaml');
    expect(error.issues).toEqual([
      { path: 'rules[0].turns[0].repeat', line: 5, message: expect.stringContaining('>=1') },
      { path: 'rules[0].turns[1].tool.name', line: 6, message: expect.stringContaining('expected string') },
    ]);
    expect(error.message).toContain('scenario.yaml');
    expect(error.message).toContain('rules[0].turns[1].tool.name (line 6)');
  });

  test('rejects unknown keys, so a typo does not silently do nothing', () => {
    const error = issuesOf('rules:\n  - match: x\n    turns: [ { text: hi, failfirst: [] } ]\n');
    expect(error.issues[0]).toMatchObject({ path: 'rules[0].turns[0]', message: expect.stringContaining('failfirst') });
  });

  test('reports an invalid regular expression at match.regex', () => {
    const error = issuesOf('rules:\n  - match: { regex: "(" }\n    turns: [ { text: hi } ]\n');
    expect(error.issues[0]).toMatchObject({ path: 'rules[0].match.regex', message: expect.stringContaining('invalid regular expression') });
  });

  test('rejects a turn with nothing to send, and both tool and tools', () => {
    const error = issuesOf('rules:\n  - match: x\n    turns:\n      - {}\n      - { tool: { name: A }, tools: [ { name: B } ] }\n');
    expect(error.issues.map((i) => i.path)).toEqual(['rules[0].turns[0]', 'rules[0].turns[1].tool']);
  });

  test('reports YAML syntax errors with their line', () => {
    const error = issuesOf('rules:\n  - match: "x\n    turns: [\n');
    expect(error.issues[0].line).toBeGreaterThan(0);
    expect(error.message).toMatch(/^\[SCENARIO_INVALID\] scenario\.yaml/);
  });

  test('names the file when it cannot be read', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'scenario-'));
    try {
      await expect(loadScenario(join(dir, 'missing.yaml'))).rejects.toThrow(/missing\.yaml.*\n.*cannot read the file/);
      await writeFile(join(dir, 'bad.yaml'), 'rules: 3\n');
      await expect(loadScenario(join(dir, 'bad.yaml'))).rejects.toThrow(/bad\.yaml[\s\S]*rules \(line 1\)/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('selectTurn', () => {
  const scenario = validateScenario({
    rules: [
      { match: 'Stage: implement', turns: [{ text: 'one' }, { text: 'two' }] },
      { name: 'review', match: { regex: 'stage: rev', flags: 'i' }, turns: [{ text: 'r' }], repeatLastTurn: true },
    ],
  });
  const user = (text: string) => ({ role: 'user', content: [{ type: 'text', text }] });
  const assistant = { role: 'assistant', content: [{ type: 'text', text: 'x' }] };

  test('picks the turn from the number of assistant messages', () => {
    const selection = selectTurn(scenario, [user('Stage: implement'), assistant, user('go on')]);
    expect(selection).toMatchObject({ kind: 'turn', ruleIndex: 0, turnIndex: 1, turn: { text: 'two' } });
  });

  test('matches only the first user message', () => {
    expect(selectTurn(scenario, [user('hello'), assistant, user('Stage: implement')]).kind).toBe('no-match');
  });

  test('says which rule ran out of turns and how to fix it', () => {
    const selection = selectTurn(scenario, [user('Stage: implement'), assistant, user('a'), assistant, user('b')]);
    expect(selection.kind).toBe('exhausted');
    if (selection.kind === 'exhausted') {
      expect(selection.message).toContain('no more scripted turns for rule rules[0] "Stage: implement" (asked for turn 2');
      expect(selection.message).toContain('only 2 scripted');
    }
  });

  test('serves the last turn again with repeatLastTurn', () => {
    const selection = selectTurn(scenario, [user('STAGE: REVIEW'), assistant, user('a'), assistant, user('b')]);
    expect(selection).toMatchObject({ kind: 'turn', ruleName: 'review', turnIndex: 2, scriptedIndex: 0 });
  });

  test('serves the fallback turn when no rule matches', () => {
    const withFallback = validateScenario({ rules: [], fallback: { text: 'fallback' } });
    expect(selectTurn(withFallback, [{ role: 'user', content: 'anything' }])).toMatchObject({ kind: 'turn', ruleName: 'fallback' });
  });
});

describe('textChunks', () => {
  test('splits text into the requested number of chunks', () => {
    expect([...textChunks('abcdef', 1, 3)]).toEqual(['ab', 'cd', 'ef']);
  });

  test('repeats text across chunk boundaries exactly', () => {
    const chunks = [...textChunks('abc', 5, 4)];
    expect(chunks).toHaveLength(4);
    expect(chunks.join('')).toBe('abc'.repeat(5));
  });

  test('never splits a surrogate pair', () => {
    const chunks = [...textChunks('a😀b😀', 3, 7)];
    expect(chunks.join('')).toBe('a😀b😀'.repeat(3));
    for (const chunk of chunks) expect(chunk).toBe(Buffer.from(chunk, 'utf8').toString('utf8'));
  });

  test('keeps chunks bounded for huge repeated text', () => {
    let total = 0;
    let largest = 0;
    for (const chunk of textChunks('0123456789abcdef', 1 << 20, 1)) {
      total += chunk.length;
      largest = Math.max(largest, chunk.length);
    }
    expect(total).toBe(16 << 20);
    expect(largest).toBeLessThanOrEqual(1 << 20);
  });
});
