import { describe, expect, it } from 'vitest';
import { readAgentOutput } from '../../src/pipeline/contract.js';

const block = (json: string): string => `\`\`\`json\n${json}\n\`\`\``;

describe('readAgentOutput', () => {
  it('reads the report block at the end of an answer', () => {
    const reading = readAgentOutput(`Done.\n${block('{"success": true, "summary": "Built it.", "outputs": {"n": 2}}')}`);
    expect(reading).toEqual({ kind: 'report', report: { success: true, summary: 'Built it.', outputs: { n: 2 } } });
  });

  it('takes the last valid block when the agent quoted an example earlier', () => {
    const text = `Example:\n${block('{"success": false, "summary": "example"}')}\nReal:\n${block('{"success": true, "summary": "real"}')}`;
    expect(readAgentOutput(text)).toMatchObject({ kind: 'report', report: { summary: 'real', outputs: {} } });
  });

  it('keeps a reviewer verdict and feedback', () => {
    const reading = readAgentOutput(block('{"success": true, "summary": "s", "verdict": "rework", "feedback": ["fix x"]}'));
    expect(reading).toMatchObject({ kind: 'report', report: { verdict: 'rework', feedback: ['fix x'] } });
  });

  it('turns BLOCKED into a question for a person', () => {
    expect(readAgentOutput('I looked.\nBLOCKED: which database should I use?')).toEqual({
      kind: 'needs_input',
      question: 'which database should I use?',
      blocked: true,
    });
  });

  it('treats a closing question without a report as needing input', () => {
    expect(readAgentOutput('I found two specs.\n\nWhich one should I implement?')).toEqual({
      kind: 'needs_input',
      question: 'Which one should I implement?',
      blocked: false,
    });
  });

  it('explains a violation: no block, broken JSON, wrong shape, empty', () => {
    expect(readAgentOutput('All done!')).toMatchObject({ kind: 'violation', reason: expect.stringContaining('no fenced JSON block') });
    expect(readAgentOutput(block('{"success": tru'))).toMatchObject({ kind: 'violation', reason: expect.stringContaining('not valid JSON') });
    expect(readAgentOutput(block('{"success": "yes", "summary": 1}'))).toMatchObject({
      kind: 'violation',
      reason: expect.stringMatching(/success .*; summary/),
    });
    expect(readAgentOutput('  ')).toEqual({ kind: 'violation', reason: 'the agent gave no answer' });
  });
});
