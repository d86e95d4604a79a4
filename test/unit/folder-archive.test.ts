import { mkdir, mkdtemp, readFile, rename, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { createArchive, extractArchive, listFolder } from '../../src/activities/checkpoint/folder-archive.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';

let scratch: string;
beforeEach(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'folder-archive-'));
});
afterEach(async () => {
  await rm(scratch, { recursive: true, force: true });
});

test.skipIf(MISSING_SANDBOX_PACKAGES.includes('bubblewrap'))(
  'archives nothing from outside the folder when a listed folder is swapped for a symlink before tar reads it',
  async () => {
    const dir = path.join(scratch, 'workspace');
    const outside = path.join(scratch, 'home', '.ssh');
    await mkdir(path.join(dir, 'd'), { recursive: true });
    await mkdir(outside, { recursive: true });
    await writeFile(path.join(dir, 'd', 'id_ed25519'), 'placeholder\n');
    await writeFile(path.join(dir, 'notes.md'), 'Notes.\n');
    await writeFile(path.join(outside, 'id_ed25519'), 'WORKER-KEY-91ab\n');
    const { entries } = await listFolder(dir, { maxBytes: 1_000_000 });
    // What a stage running alongside does between the listing and tar's read.
    await rename(path.join(dir, 'd'), path.join(dir, 'd-moved'));
    await symlink(outside, path.join(dir, 'd'));
    const archive = path.join(scratch, 'out', 'checkpoint.tar');
    await mkdir(path.dirname(archive));
    await createArchive(dir, entries, archive);
    expect((await readFile(archive)).toString('latin1')).not.toContain('WORKER-KEY');
    const unpacked = path.join(scratch, 'unpacked');
    await mkdir(unpacked);
    await extractArchive(archive, unpacked);
    // The rest of the folder is there, the swapped link stored as a link.
    expect(await readFile(path.join(unpacked, 'notes.md'), 'utf8')).toBe('Notes.\n');
  },
);

test("restores each file's modification time to below the millisecond, as a resumed stage compares them", async () => {
  const dir = path.join(scratch, 'workspace');
  await mkdir(path.join(dir, 'src'), { recursive: true });
  await writeFile(path.join(dir, 'src', 'kept.txt'), 'unchanged\n');
  // A time with a fraction of a millisecond, as file systems keep them (whole seconds in gnu tar headers).
  await utimes(path.join(dir, 'src', 'kept.txt'), 1_795_944_392.372_898, 1_795_944_392.372_898);
  const archive = path.join(scratch, 'checkpoint.tar');
  await createArchive(dir, (await listFolder(dir, { maxBytes: 1_000_000 })).entries, archive);
  const unpacked = path.join(scratch, 'unpacked');
  await mkdir(unpacked);
  await extractArchive(archive, unpacked);
  const [before, after] = await Promise.all([stat(path.join(dir, 'src', 'kept.txt'), { bigint: true }), stat(path.join(unpacked, 'src', 'kept.txt'), { bigint: true })]);
  expect(after.mtimeNs).toBe(before.mtimeNs);
  expect(before.mtimeNs % 1_000_000n).not.toBe(0n);
});
