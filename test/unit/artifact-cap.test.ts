import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { collectArtifacts, snapshotFiles } from '../../src/activities/workspace/run-workspace.js';
import { defaultPayloadConverter } from '@temporalio/common';

describe('artifacts of a stage that changed thousands of files', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'artifact-cap-'));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  test('the first 1,000 by path are listed with their hash, the rest counted by top folder and told in a warning', async () => {
    await writeFile(path.join(dir, 'before.md'), 'there before');
    const before = await snapshotFiles(dir);
    await mkdir(path.join(dir, '.venv', 'lib'), { recursive: true });
    await mkdir(path.join(dir, 'src'), { recursive: true });
    await Promise.all(Array.from({ length: 2500 }, (_, i) => writeFile(path.join(dir, '.venv', 'lib', `m${String(i).padStart(4, '0')}.py`), 'x')));
    await Promise.all(Array.from({ length: 5 }, (_, i) => writeFile(path.join(dir, 'src', `f${i}.ts`), 'code')));
    await writeFile(path.join(dir, 'README.md'), 'new');

    const collected = await collectArtifacts(dir, before);
    expect(collected.artifacts).toHaveLength(1000);
    expect(collected.artifacts[0]).toMatchObject({ path: '.venv/lib/m0000.py', bytes: 1, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(collected.artifacts.at(-1)!.path).toBe('.venv/lib/m0999.py');
    expect(collected.omitted).toEqual({ count: 1506, bytes: 1500 + 20 + 3, byFolder: { '.venv/': 1500, 'src/': 5, './': 1 } });
    expect(collected.warnings).toEqual(['the stage changed 2506 files; the first 1000 by path are listed as artifacts, not the 1506 more files (2 KB): .venv/ 1500, src/ 5, ./ 1']);
    // What the stage result carries stays small: far from Temporal's 2 MB payload limit.
    expect(defaultPayloadConverter.toPayload(collected).data!.byteLength).toBeLessThan(200_000);
  });

  test('a stage under the limit lists every file and reports nothing omitted', async () => {
    const small = await mkdtemp(path.join(tmpdir(), 'artifact-cap-small-'));
    try {
      const before = await snapshotFiles(small);
      await writeFile(path.join(small, 'a.md'), 'a');
      const collected = await collectArtifacts(small, before);
      expect(collected).toEqual({ artifacts: [expect.objectContaining({ path: 'a.md' })], warnings: [] });
    } finally {
      await rm(small, { recursive: true, force: true });
    }
  });
});
