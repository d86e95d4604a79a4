import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { lentFolderHolding, recordLentFolder, refuseLentRepository } from '../../src/activities/workspace/lent-records.js';

/* Folders lent to runs (`workspace.dir`, `addDirs`) are never a run's `workspace.repo` after: its agents could write its git config. */

let base: string;
let root: string;
beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'lent-records-'));
  root = path.join(base, 'workspaces');
  for (const dir of ['shared/repo', 'shared2/repo', 'repos/project']) await mkdir(path.join(base, dir), { recursive: true });
  await recordLentFolder(root, path.join(base, 'shared'));
});
afterAll(async () => rm(base, { recursive: true, force: true }));

describe('folders lent to runs', () => {
  test('hold the repositories inside them and themselves; not a sibling sharing a prefix, nor a folder around them', async () => {
    expect(await lentFolderHolding(root, path.join(base, 'shared', 'repo'))).toBe(path.join(base, 'shared'));
    expect(await lentFolderHolding(root, path.join(base, 'shared'))).toBe(path.join(base, 'shared'));
    expect(await lentFolderHolding(root, path.join(base, 'shared2', 'repo'))).toBeUndefined();
    expect(await lentFolderHolding(root, base)).toBeUndefined();
  });

  test('a repository in one fails CONFIG_INVALID naming both; another passes', async () => {
    const refused = await refuseLentRepository(root, path.join(base, 'shared', 'repo'), 's').then(() => undefined, (err: { type?: string; message: string }) => err);
    expect(refused).toMatchObject({ type: 'CONFIG_INVALID' });
    expect(refused?.message).toContain(`lies in ${path.join(base, 'shared')}, a folder this worker lent to a run`);
    await expect(refuseLentRepository(root, path.join(base, 'repos', 'project'), 's')).resolves.toBeUndefined();
  });
});
