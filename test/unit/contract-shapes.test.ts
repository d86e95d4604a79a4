import { describe, expect, it } from 'vitest';
import { findReportBlock, readAgentOutput, withoutReportBlock } from '../../src/pipeline/contract.js';
import { findFencedBlocks } from '../../src/pipeline/fenced-blocks.js';

/*
 * Answers shaped the way real agents end their turns: commands shown in ```bash blocks, diffs, quoted
 * examples, nested Markdown, list items, CRLF from Windows tools, prose after the report. Each row says what
 * the contract parser must make of it.
 */

const REPORT = '{"success": true, "summary": "Done.", "outputs": {"tests": 12}}';
const ok = { kind: 'report', report: { success: true, summary: 'Done.', outputs: { tests: 12 } } };

const shapes: { name: string; text: string; expected: Record<string, unknown> }[] = [
  {
    name: 'a ```bash block before the report',
    text: `I ran the tests:\n\n\`\`\`bash\nnpm test\n\`\`\`\n\nAll green.\n\n\`\`\`json\n${REPORT}\n\`\`\`\n`,
    expected: ok,
  },
  {
    name: 'several ```ts, ```sh and ```diff blocks before the report',
    text: `Changed:\n\`\`\`ts\nexport const x = 1;\n\`\`\`\n\`\`\`sh\n$ npx tsc\n\`\`\`\n\`\`\`diff\n- a\n+ b\n\`\`\`\n\`\`\`json\n${REPORT}\n\`\`\``,
    expected: ok,
  },
  {
    name: 'an untagged report block',
    text: `Finished.\n\`\`\`\n${REPORT}\n\`\`\``,
    expected: ok,
  },
  {
    name: 'a report tagged JSON in capitals',
    text: `\`\`\`JSON\n${REPORT}\n\`\`\``,
    expected: ok,
  },
  {
    name: 'a tilde fence',
    text: `Done.\n~~~json\n${REPORT}\n~~~\n`,
    expected: ok,
  },
  {
    name: 'a four-backtick report',
    text: `\`\`\`\`json\n${REPORT}\n\`\`\`\`\n`,
    expected: ok,
  },
  {
    name: 'a ````markdown example holding a ```json block, then the real report',
    text: `The README now says:\n\n\`\`\`\`markdown\n## Output\n\`\`\`json\n{"success": false, "summary": "example"}\n\`\`\`\n\`\`\`\`\n\n\`\`\`json\n${REPORT}\n\`\`\``,
    expected: ok,
  },
  {
    name: 'CRLF line endings throughout',
    text: `Ran it:\r\n\`\`\`bash\r\nnpm test\r\n\`\`\`\r\n\`\`\`json\r\n${REPORT}\r\n\`\`\`\r\n`,
    expected: ok,
  },
  {
    name: 'prose after the report',
    text: `\`\`\`json\n${REPORT}\n\`\`\`\n\nLet me know if you need anything else!`,
    expected: ok,
  },
  {
    name: 'the report inside a list item',
    text: `Summary:\n\n1. Ran the tests:\n   \`\`\`bash\n   npm test\n   \`\`\`\n2. Report:\n   \`\`\`json\n   ${REPORT}\n   \`\`\`\n`,
    expected: ok,
  },
  {
    name: 'a fence with an info string after the language',
    text: `\`\`\`json title="report"\n${REPORT}\n\`\`\``,
    expected: ok,
  },
  {
    name: 'a closing fence with trailing spaces and a longer closing fence',
    text: `\`\`\`bash\nls\n\`\`\`   \n\`\`\`json\n${REPORT}\n\`\`\`\`\``,
    expected: ok,
  },
  {
    name: 'a pretty-printed report after an untagged block of command output',
    text: `Output:\n\`\`\`\nPASS  test/a.test.ts\n\`\`\`\n\`\`\`json\n{\n  "success": true,\n  "summary": "Done.",\n  "outputs": {\n    "tests": 12\n  }\n}\n\`\`\``,
    expected: ok,
  },
  {
    name: 'a block with ``` inside its bash heredoc does not end the outer ```` block',
    text: `\`\`\`\`bash\ncat <<'MD' > notes.md\n\`\`\`\ncode\n\`\`\`\nMD\n\`\`\`\`\n\`\`\`json\n${REPORT}\n\`\`\``,
    expected: ok,
  },
  {
    name: 'a quoted example earlier and a malformed last block: a violation, not the example',
    text: `Format:\n\`\`\`json\n{"success": true, "summary": "example"}\n\`\`\`\nMine:\n\`\`\`json\n{"success": true, "summary": "Done.",}\n\`\`\``,
    expected: { kind: 'violation', reason: expect.stringContaining('the last fenced JSON block is not valid JSON') },
  },
  {
    name: 'a last block that breaks the schema after a valid one: a violation',
    text: `\`\`\`json\n${REPORT}\n\`\`\`\nCorrection:\n\`\`\`json\n{"success": "yes", "summary": "Done."}\n\`\`\``,
    expected: { kind: 'violation', reason: expect.stringMatching(/does not match the contract: success/) },
  },
  {
    name: 'an answer cut off inside the report block',
    text: `Work done.\n\`\`\`json\n{"success": true, "summ`,
    expected: { kind: 'violation', reason: expect.stringContaining('never closed: the answer was cut off') },
  },
  {
    name: 'a JSON array as the last block',
    text: `\`\`\`json\n[1, 2]\n\`\`\``,
    expected: { kind: 'violation', reason: expect.stringContaining('not a JSON object') },
  },
  {
    name: 'only a ```bash block: no report',
    text: `I ran:\n\`\`\`bash\nnpm test\n\`\`\`\nAll good.`,
    expected: { kind: 'violation', reason: expect.stringContaining('no fenced JSON block') },
  },
  {
    name: 'inline triple backticks in prose are not a fence',
    text: `Use \`\`\`json blocks\`\`\` for reports.\n\`\`\`json\n${REPORT}\n\`\`\``,
    expected: ok,
  },
  {
    name: 'a ```bash block and then BLOCKED',
    text: `I tried:\n\`\`\`bash\npsql\n\`\`\`\nBLOCKED: which database should I use?`,
    expected: { kind: 'needs_input', question: 'which database should I use?', blocked: true },
  },
];

describe('readAgentOutput on answers shaped like real agents\' answers', () => {
  it.each(shapes)('$name', ({ text, expected }) => {
    expect(readAgentOutput(text)).toEqual(expected);
  });

  it('covers at least 15 shapes', () => {
    expect(shapes.length).toBeGreaterThanOrEqual(15);
  });
});

describe('findFencedBlocks', () => {
  it('pairs each fence with its own closing fence and keeps offsets', () => {
    const text = 'a\n```bash\nnpm test\n```\nb\n~~~~\n```\n~~~~\n';
    const blocks = findFencedBlocks(text);
    expect(blocks.map(({ language, body, closed }) => ({ language, body, closed }))).toEqual([
      { language: 'bash', body: 'npm test', closed: true },
      { language: '', body: '```', closed: true },
    ]);
    expect(text.slice(blocks[0].start, blocks[0].end)).toBe('```bash\nnpm test\n```\n');
  });

  it('runs an unclosed block to the end of the text', () => {
    expect(findFencedBlocks('```json\n{"a":')).toEqual([{ language: 'json', body: '{"a":', start: 0, end: 13, closed: false }]);
  });

  it('does not close a backtick fence with tildes or a shorter fence', () => {
    expect(findFencedBlocks('````\n```\n~~~~\n````').map((b) => b.body)).toEqual(['```\n~~~~']);
  });
});

describe('withoutReportBlock', () => {
  it('keeps the answer and its other blocks, without the report', () => {
    const text = `# Notes\n\nRun:\n\`\`\`bash\nnpm test\n\`\`\`\n\n\`\`\`json\n${REPORT}\n\`\`\`\n`;
    expect(withoutReportBlock(text)).toBe('# Notes\n\nRun:\n```bash\nnpm test\n```\n');
    expect(findReportBlock(text)?.language).toBe('json');
  });

  it('keeps prose after the report, is empty for a reply that only reports, and leaves a text without a report as is', () => {
    expect(withoutReportBlock(`Intro.\n\`\`\`json\n${REPORT}\n\`\`\`\nThanks.`)).toBe('Intro.\nThanks.\n');
    expect(withoutReportBlock(`\`\`\`json\n${REPORT}\n\`\`\``)).toBe('');
    expect(withoutReportBlock('Just prose.')).toBe('Just prose.');
  });
});

describe('withoutReportBlock with the report first', () => {
  it('keeps what follows it, without a leading blank line', () => {
    expect(withoutReportBlock(`\`\`\`json\n${REPORT}\n\`\`\`\n\nNotes follow.\n`)).toBe('Notes follow.\n');
  });
});
