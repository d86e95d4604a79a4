import { execFileSync } from 'node:child_process';
import { describe, expect, test } from 'vitest';
import { agentPipelineCommand, shellQuote, shellWord } from '../../src/pipeline/shell-words.js';
import { commandsFor } from '../../src/workflows/waits.js';

/** The words `sh` makes of `text`. */
const wordsOf = (text: string): string[] => execFileSync('sh', ['-c', `printf '%s\\0' ${text}`], { encoding: 'utf8' }).split('\0').slice(0, -1);

describe('shell words in printed commands', () => {
  test('a value is one word a shell gives back unchanged, whatever characters it holds', () => {
    const values = ['nightly', 'my run', "it's", '$(touch pwned)', '`id`', 'a;b&&c|d', '~root', '=ls', '*', 'x\ny', '', 'Bash(git push:*)', "'; echo '"];
    for (const value of values) expect(wordsOf(`${shellWord(value)} end`), JSON.stringify(value)).toEqual([value, 'end']);
    for (const value of values) expect(wordsOf(shellQuote(value)), JSON.stringify(value)).toEqual([value]);
  });

  test('a plain value is left as it is, so the usual ids read as before', () => {
    for (const value of ['spec-20261127T101500-ab12', 'nightly-2024-06-01T02:00:00Z', 'agent/x', 'a=b', 'key@host', '50%']) expect(shellWord(value)).toBe(value);
  });

  test("a failed stage's commands offer --feedback only where an agent reads it", () => {
    expect(commandsFor('failure', 'my run', 'check')).toEqual([
      "agent-pipeline retry 'my run' --stage check",
      "agent-pipeline skip 'my run' --stage check",
      "agent-pipeline cancel 'my run'",
    ]);
    expect(commandsFor('failure', 'r1', 'build', { feedback: true })).toContain('agent-pipeline retry r1 --stage build --feedback "..."');
    expect(commandsFor('permission', 'r1', 'build', { tools: ['Bash(git push:*)'] })[0]).toBe("agent-pipeline approve r1 --stage build --allow 'Bash(git push:*)'");
  });

  test('an id starting with "-" goes after `--`, the options before it, so no command reads it as an option', () => {
    const argsOf = (line: string): string[] => wordsOf(line.slice('agent-pipeline '.length));
    expect(agentPipelineCommand('watch', 'r1')).toBe('agent-pipeline watch r1');
    expect(argsOf(agentPipelineCommand('watch', '-r1'))).toEqual(['watch', '--', '-r1']);
    expect(argsOf(agentPipelineCommand('schedule describe', "--it's"))).toEqual(['schedule', 'describe', '--', "--it's"]);
    expect(argsOf(agentPipelineCommand('fork', '-r1', ['--from STAGE'], ['FILE']))).toEqual(['fork', '--from', 'STAGE', '--', '-r1', 'FILE']);
    expect(commandsFor('answer', '-r1', 'spec').map(argsOf)).toEqual([
      ['answer', '--stage', 'spec', '--', '-r1', '...'],
      ['reject', '--stage', 'spec', '--reason', '...', '--', '-r1'],
    ]);
    expect(commandsFor('budget', '-r 1', 'spec', { budgetUsd: 5 }).map(argsOf)).toEqual([
      ['approve', '--budget-usd', '5', '--', '-r 1'],
      ['reject', '--reason', '...', '--', '-r 1'],
    ]);
    expect(commandsFor('failure', '-r1', 'check').at(-1)).toBe('agent-pipeline cancel -- -r1');
  });
});
