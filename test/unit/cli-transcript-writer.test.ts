import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TranscriptWriter } from '../../src/activities/backends/claude-cli/transcript-writer.js';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'transcript-writer-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const KEY = 'sk-ant-secret-0123456789';
const TOKEN = 'tok-abcdefgh';

async function writeInPieces(name: string, text: string, size: number): Promise<string> {
  const file = path.join(dir, name);
  const writer = await TranscriptWriter.open(file, [KEY, TOKEN, undefined, 'short']);
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += size) await writer.write(bytes.subarray(at, at + size));
  await writer.close();
  return readFile(file, 'utf8');
}

describe('TranscriptWriter', () => {
  test('replaces every secret, also when a write boundary splits it, and nothing else', async () => {
    const text = `{"a":"${KEY}"}\nenv: ANTHROPIC_API_KEY=${KEY}${KEY} and ${TOKEN}.\nshort stays; ${KEY.slice(0, 10)} stays\n${KEY}`;
    const expected = text.split(KEY).join('<redacted>').split(TOKEN).join('<redacted>');
    for (const size of [1, 2, 3, 7, 11, 24, 25, 1000]) {
      expect(await writeInPieces(`t-${size}.jsonl`, text, size)).toBe(expected);
    }
  });

  test('appends, so a second writer on the same file keeps what the first wrote', async () => {
    await writeInPieces('append.jsonl', 'first\n', 4);
    const file = path.join(dir, 'append.jsonl');
    const writer = await TranscriptWriter.open(file, [KEY]);
    await writer.write(Buffer.from('second\n'));
    await writer.close();
    expect(await readFile(file, 'utf8')).toBe('first\nsecond\n');
  });
});
