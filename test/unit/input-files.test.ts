import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseInputFlags, readInputFlags } from '../../src/cli/options.js';
import { INPUT_FILE_MAX_BYTES, readInputValues } from '../../src/library/input-files.js';

describe('--input flags', () => {
  test('key=value is a value, key=@file and key=@- name a file and standard input, key=@@text is the literal @text', () => {
    expect(parseInputFlags(['a=plain', 'b=@notes.md', 'c=@-', 'd=@@handle', 'e=x=y', 'f='])).toEqual({
      a: 'plain',
      b: { file: 'notes.md' },
      c: { file: '-' },
      d: '@handle',
      e: 'x=y',
      f: '',
    });
  });

  test('a lone @ or a flag without = is refused with the fix', () => {
    expect(() => parseInputFlags(['a=@'])).toThrow('--input a=@: expected a file after @ (key=@notes.md, or key=@- for standard input); write key=@@ for a literal "@"');
    expect(() => parseInputFlags(['novalue'])).toThrow('--input novalue: expected key=value');
  });
});

describe('reading input values from files', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'input-files-'));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));
  const noStdin = Readable.from([]);

  test('a file and standard input become the values, byte for byte, and plain values stay', async () => {
    const file = path.join(dir, 'big.md');
    const text = `# Notes ✓\n${'line of text\n'.repeat(25_000)}`;
    await writeFile(file, text);
    const stdin = Readable.from([Buffer.from('from '), Buffer.from('stdin ✓')]);
    expect(await readInputFlags([`notes=@${file}`, 'piped=@-', 'topic=tea'], stdin)).toEqual({ notes: text, piped: 'from stdin ✓', topic: 'tea' });
  });

  test('a missing file, a folder, a file over the limit and bytes that are not UTF-8 are refused, naming the flag and the file', async () => {
    const missing = path.join(dir, 'missing.md');
    await expect(readInputFlags([`notes=@${missing}`], noStdin)).rejects.toMatchObject({
      code: 'FILE_NOT_FOUND',
      message: `[FILE_NOT_FOUND] --input notes=@${missing}: cannot read ${missing} (no such file); give the path of a text file, or @@ to start a value with @`,
    });
    await mkdir(path.join(dir, 'folder'));
    await expect(readInputFlags([`notes=@${path.join(dir, 'folder')}`], noStdin)).rejects.toMatchObject({
      code: 'FILE_UNREADABLE',
      message: `[FILE_UNREADABLE] --input notes=@${path.join(dir, 'folder')}: ${path.join(dir, 'folder')} is not a regular file (a folder, device or pipe); give the path of a text file`,
    });
    const large = path.join(dir, 'large.txt');
    await writeFile(large, Buffer.alloc(INPUT_FILE_MAX_BYTES + 1, 'a'));
    await expect(readInputFlags([`notes=@${large}`], noStdin)).rejects.toMatchObject({
      code: 'INPUT_TOO_LARGE',
      message: expect.stringMatching(new RegExp(`^\\[INPUT_TOO_LARGE\\] --input notes=@${large}: ${large} holds 2\\.0 MB, over the 2\\.0 MB an input may hold`)),
    });
    const binary = path.join(dir, 'binary.bin');
    await writeFile(binary, Buffer.from([0xff, 0xfe, 0x00, 0x80]));
    await expect(readInputFlags([`blob=@${binary}`], noStdin)).rejects.toMatchObject({ code: 'FILE_UNREADABLE', message: `[FILE_UNREADABLE] --input blob=@${binary}: ${binary} is not UTF-8 text; an input is text` });
  });

  test('standard input over the limit is refused without reading it all, and can be read only once', async () => {
    let pulled = 0;
    const endless = new Readable({
      read() {
        pulled++;
        this.push(Buffer.alloc(64 * 1024, 'x'));
      },
    });
    await expect(readInputValues({ diff: { file: '-' } }, { stdin: endless, maxBytes: 200_000 })).rejects.toMatchObject({
      code: 'INPUT_TOO_LARGE',
      message: expect.stringContaining('[INPUT_TOO_LARGE] input "diff" ({ file: "-" }): standard input holds more than 196 KB'),
    });
    expect(pulled).toBeLessThan(10);
    endless.destroy();
    await expect(readInputFlags(['a=@-', 'b=@-'], noStdin)).rejects.toMatchObject({ code: 'INPUT_INVALID', message: '[INPUT_INVALID] --input a=@- and --input b=@- both read standard input, which can be read once; put one of them in a file' });
  });

  test('the library takes { file } values and names the input in its errors', async () => {
    const file = path.join(dir, 'brief.txt');
    await writeFile(file, 'the brief');
    expect(await readInputValues({ brief: { file }, topic: 'tea' })).toEqual({ brief: 'the brief', topic: 'tea' });
    await expect(readInputValues({ brief: { file: path.join(dir, 'nope') } })).rejects.toThrow(`[FILE_NOT_FOUND] input "brief" ({ file: ${JSON.stringify(path.join(dir, 'nope'))} }): cannot read`);
    await expect(readInputValues({ brief: 42 as unknown as string })).rejects.toThrow('[INPUT_INVALID] input "brief": expected a string, { file: path } or { object: {...} }, got 42');
  });
});
