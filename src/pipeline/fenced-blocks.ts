/*
 * Fenced code blocks of a Markdown answer, found the way CommonMark finds them (spec 0.31, "Fenced code
 * blocks"): an opening fence is a line of three or more backticks or tildes with an optional info string, and
 * only a fence of the same character, at least as long, with nothing after it, closes it. Everything between
 * is content, other fences included, so a ```bash block, a ````markdown example with a ```json block inside,
 * or a block inside a list item never pairs with the wrong fence. Pure: used by the output contract parser.
 */

/** One fenced block of a Markdown text. */
export interface FencedBlock {
  /** The info string's first word (`json`, `bash`), as written; empty when the fence has none. */
  language: string;
  /** The content lines, with the opening fence's indentation removed and line endings normalised to `\n`. */
  body: string;
  /** Where the block starts (the opening fence's line) in the text. @unit UTF-16 code units */
  start: number;
  /** Where the block ends: just past the closing fence's line, or the end of the text when it is never closed. */
  end: number;
  /** False when the text ends before a closing fence (a truncated answer). */
  closed: boolean;
}

/**
 * Indentation, then list markers or block quote markers (a block inside a list item or a quote), then the fence
 * and its info string. CommonMark limits the indentation of a top-level fence to three spaces; agents indent
 * blocks in list items further, so any indentation is accepted.
 */
const OPENING = /^([ \t]*(?:(?:[-*+]|\d{1,9}[.)]|>)[ \t]+)*)(`{3,}|~{3,})(.*)$/;

/** Lines with their offsets; `\r\n` and `\n` both end a line. */
function splitLines(text: string): { line: string; start: number; next: number }[] {
  const lines: { line: string; start: number; next: number }[] = [];
  let start = 0;
  while (start < text.length) {
    const newline = text.indexOf('\n', start);
    const stop = newline === -1 ? text.length : newline;
    const next = newline === -1 ? text.length : newline + 1;
    lines.push({ line: text.slice(start, stop).replace(/\r$/, ''), start, next });
    start = next;
  }
  return lines;
}

/** Every fenced block of `text`, in order. Blocks never nest: a fence inside a block is content. */
export function findFencedBlocks(text: string): FencedBlock[] {
  const lines = splitLines(text);
  const blocks: FencedBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = OPENING.exec(lines[i].line);
    if (!open) continue;
    const [, prefix, fence, info] = open;
    // A backtick fence's info string may not contain backticks: "```inline``` code" is not a fence.
    if (fence[0] === '`' && info.includes('`')) continue;
    const indent = prefix.length;
    const closing = new RegExp(`^[ \\t]*(?:>[ \\t]*)*${fence[0] === '`' ? '`' : '~'}{${fence.length},}[ \\t]*$`);
    const content: string[] = [];
    let j = i + 1;
    while (j < lines.length && !closing.test(lines[j].line)) {
      content.push(stripIndent(lines[j].line, indent));
      j++;
    }
    const closed = j < lines.length;
    blocks.push({
      language: info.trim().split(/\s+/)[0] ?? '',
      body: content.join('\n'),
      start: lines[i].start,
      end: closed ? lines[j].next : text.length,
      closed,
    });
    i = j;
  }
  return blocks;
}

/** Removes up to `indent` columns of leading whitespace (and block quote markers), as CommonMark does. */
function stripIndent(line: string, indent: number): string {
  let cut = 0;
  while (cut < indent && cut < line.length && (line[cut] === ' ' || line[cut] === '\t' || line[cut] === '>')) cut++;
  return line.slice(cut);
}
