import { describe, expect, it } from 'vitest';
import { terminalSafe } from '../../src/terminal-text.js';
import { LiveView } from '../../src/cli/live-view.js';
import { formatLogEntry } from '../../src/logging.js';

describe('terminalSafe', () => {
  it('drops escape sequences: colours, screen clears, cursor moves, OSC titles, clipboard writes and links', () => {
    const text = 'a\x1b[31mred\x1b[0m b\x1b[2J\x1b[1;1H c\x1b]0;title\x07 d\x1b]52;c;ZXZpbA==\x1b\\ e\x1b]8;;https://x.example\x07link\x1b]8;;\x07 f';
    expect(terminalSafe(text)).toBe('ared b c d elink f');
  });

  it('shows any other control character as its symbol, so nothing is hidden: bell, backspace, carriage return, DEL, C1', () => {
    expect(terminalSafe('bell\x07 back\x08 cr\rover del\x7f c1\x85 nul\x00 esc\x1b')).toBe('bell\u2407 back\u2408 cr\u240dover del\u2421 c1\ufffd nul\u2400 esc\u241b');
  });

  it('keeps text, tabs, newlines (a CRLF is a newline) and every other Unicode character as they are', () => {
    expect(terminalSafe('line one\twith tab\r\nline two é 漢字 😀\n')).toBe('line one\twith tab\nline two é 漢字 😀\n');
  });
});

describe('printed text keeps no terminal control', () => {
  it("a live view's lines: its own cursor moves only, and a stage line quoting a run stays one row", () => {
    let written = '';
    const stream = { write: (text: string) => (written += text), isTTY: true, columns: 80 };
    const view = new LiveView(stream);
    (view as unknown as { redraw(lines: string[]): void }).redraw(['stage a: \x1b]52;c;ZXZpbA==\x07said\nmore\x1b[2J']);
    expect(written).toBe('stage a: said more\x1b[K\n\x1b[J');
  });

  it("the worker's text log, message and fields alike; its JSON log escapes them already", () => {
    const entry = { level: 'WARN' as const, message: 'stage x: \x1b[2Jwarned', timestampNanos: 0n, meta: { said: '\x1b]0;t\x07ok\x07' } };
    expect(formatLogEntry(entry, 'text')).toBe('1970-01-01T00:00:00.000Z WARN  stage x: warned said=ok\u2407');
    expect(formatLogEntry(entry, 'json')).not.toMatch(/[\u0007\u001b]/u);
  });
});
