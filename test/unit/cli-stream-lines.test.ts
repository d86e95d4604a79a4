import { describe, expect, test } from 'vitest';
import { JsonSkeleton } from '../../src/activities/backends/claude-cli/bounded-json.js';
import { StdoutLineSplitter, type StdoutPiece } from '../../src/activities/backends/claude-cli/stream-lines.js';

/** Feeds `bytes` in pieces of the given sizes, cycling through them. */
function feedInPieces(bytes: Buffer, sizes: number[], push: (chunk: Buffer) => void): void {
  let at = 0;
  for (let i = 0; at < bytes.length; i++) {
    const size = sizes[i % sizes.length];
    push(bytes.subarray(at, at + size));
    at += size;
  }
}

function skeletonOf(json: string, sizes: number[], maxStringBytes: number, maxTotalBytes = 1 << 20) {
  const skeleton = new JsonSkeleton({ maxStringBytes, maxTotalBytes });
  feedInPieces(Buffer.from(json), sizes, (chunk) => skeleton.push(chunk));
  return skeleton.finish();
}

describe('JsonSkeleton', () => {
  test('leaves JSON with short strings unchanged, however it is chunked', () => {
    const value = { type: 'result', result: 'ok "quoted" \\ back\nslash é 😀', n: [1, 2.5, null, true], nested: { a: '' } };
    const json = JSON.stringify(value);
    for (const sizes of [[1], [2, 3], [7], [json.length]]) {
      const { text, truncatedStrings } = skeletonOf(json, sizes, 1024);
      expect(text).toBe(json);
      expect(truncatedStrings).toBe(0);
    }
  });

  test('cuts a long string to a tail of the original and keeps the fields around it', () => {
    // Escapes, quotes, backslash runs and multi-byte characters everywhere, so cuts land inside all of them.
    const unit = 'ab\\"c\\\\\\d"\n\t\u0001é漢字🙂 \ud83d\ude00';
    const long = unit.repeat(20_000);
    const json = JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: long }] }, session_id: 's-1' });
    for (const sizes of [[4096], [1, 4093, 17], [65536]]) {
      const { text, truncatedStrings } = skeletonOf(json, sizes, 10_000);
      expect(truncatedStrings).toBe(1);
      const parsed = JSON.parse(text ?? '') as { type: string; session_id: string; message: { content: { text: string }[] } };
      expect(parsed.type).toBe('assistant');
      expect(parsed.session_id).toBe('s-1');
      const tail = parsed.message.content[0].text;
      expect(Buffer.byteLength(tail)).toBeGreaterThan(5_000);
      expect(Buffer.byteLength(JSON.stringify(tail))).toBeLessThanOrEqual(10_002);
      expect(long.endsWith(tail)).toBe(true);
    }
  });

  test('gives up, instead of growing, when the structure itself exceeds the total cap', () => {
    const json = JSON.stringify(Array.from({ length: 5_000 }, (_, i) => i));
    expect(skeletonOf(json, [100], 64, 1_000).text).toBeUndefined();
  });
});

function collect(chunks: Buffer[], options = { maxLineBytes: 64, maxStringBytes: 16 }): StdoutPiece[] {
  const splitter = new StdoutLineSplitter(options);
  return [...chunks.flatMap((chunk) => splitter.push(chunk)), ...splitter.end()];
}

describe('StdoutLineSplitter', () => {
  test('hands over short lines whole, across chunk boundaries, and a last line without newline', () => {
    const pieces = collect([Buffer.from('{"a":1}\n{"b"'), Buffer.from(':2}\n\n{"c":3}')]);
    expect(pieces.map((p) => (p.kind === 'line' ? p.raw.toString() : p.kind))).toEqual(['{"a":1}', '{"b":2}', '{"c":3}']);
  });

  test('passes a long line through as raw bytes and ends it with a parseable skeleton', () => {
    const line = JSON.stringify({ type: 'result', result: `${'x'.repeat(500)}THE END`, session_id: 'abc' });
    const pieces = collect([Buffer.from(`{"small":true}\n${line.slice(0, 40)}`), Buffer.from(`${line.slice(40)}\n{"after":1}\n`)]);
    expect(pieces[0]).toMatchObject({ kind: 'line' });
    const raw = Buffer.concat(pieces.filter((p) => p.kind === 'long-bytes').map((p) => p.chunk)).toString();
    expect(raw).toBe(`${line}\n`);
    const end = pieces.find((p) => p.kind === 'long-line');
    expect(end).toMatchObject({ kind: 'long-line', bytes: line.length, truncatedStrings: 1 });
    const parsed = JSON.parse((end as { skeleton: string }).skeleton) as { type: string; result: string; session_id: string };
    expect(parsed).toMatchObject({ type: 'result', session_id: 'abc' });
    expect(parsed.result.endsWith('THE END')).toBe(true);
    expect(parsed.result.length).toBeLessThanOrEqual(16);
    expect(pieces.at(-1)).toMatchObject({ kind: 'line' });
  });
});
