import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { readLines } from '../../src/library/tail-file.js';

/** A file in a folder of its own, removed when the test ends. */
async function scratchFile(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'tail-'));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return path.join(dir, 't.jsonl');
}

async function collect(lines: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const line of lines) out.push(line);
  return out;
}

describe('readLines', () => {
  it('keeps a multi-byte character that straddles two reads intact', async () => {
    const file = await scratchFile();
    const line = `${'a'.repeat(64 * 1024 - 1)}é€ end`;
    await writeFile(file, `${line}\nsecond\n`);
    expect(await collect(readLines(file, { follow: false }))).toEqual([line, 'second']);
  });

  it('reads what the writer appended between the last read and learning it had finished', async () => {
    const file = await scratchFile();
    await writeFile(file, 'first\n');
    const isDone = async (): Promise<boolean> => {
      await appendFile(file, 'last words\n');
      return true;
    };
    expect(await collect(readLines(file, { follow: true, isDone, pollMs: 10 }))).toEqual(['first', 'last words']);
  });
});
