import { appendFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readLines } from '../../src/library/tail-file.js';
import { testFolder } from '../helpers/test-folder.js';

async function collect(lines: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const line of lines) out.push(line);
  return out;
}

describe('readLines', () => {
  it('keeps a multi-byte character that straddles two reads intact', async () => {
    const file = path.join(await testFolder('tail-'), 't.jsonl');
    const line = `${'a'.repeat(64 * 1024 - 1)}é€ end`;
    await writeFile(file, `${line}\nsecond\n`);
    expect(await collect(readLines(file, { follow: false }))).toEqual([line, 'second']);
  });

  it('reads what the writer appended between the last read and learning it had finished', async () => {
    const file = path.join(await testFolder('tail-'), 't.jsonl');
    await writeFile(file, 'first\n');
    const isDone = async (): Promise<boolean> => {
      await appendFile(file, 'last words\n');
      return true;
    };
    expect(await collect(readLines(file, { follow: true, isDone, pollMs: 10 }))).toEqual(['first', 'last words']);
  });
});
