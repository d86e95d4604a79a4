import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFile, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { isInside, isStrictlyInside, resolveInside } from '../../src/files/inside.js';
import { copyRegularFile, hashRegularFile, openRegularFile, readRegularFile, readRegularFileSync } from '../../src/files/regular-file.js';
import { testFolder } from '../helpers/test-folder.js';

/** Fails the test instead of waiting for ever: what a FIFO's open without O_NONBLOCK does. */
function within<T>(promise: Promise<T>, ms = 5_000): Promise<T> {
  return Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms).unref())]);
}

describe('files whose path someone else controls', () => {
  test('a FIFO is refused at once (ENOTREG), never waited on, by every reader', async () => {
    const dir = await testFolder('regular-file-');
    const fifo = path.join(dir, 'f');
    execFileSync('mkfifo', [fifo]);
    const reads: (() => Promise<unknown>)[] = [() => readRegularFile(fifo), () => hashRegularFile(fifo), () => copyRegularFile(fifo, path.join(dir, 'copy')), () => openRegularFile(fifo, { follow: true })];
    for (const read of reads) {
      await expect(within(read())).rejects.toMatchObject({ code: 'ENOTREG' });
    }
    expect(() => readRegularFileSync(fifo)).toThrow(expect.objectContaining({ code: 'ENOTREG' }));
  });

  test('a symlink at the file is refused unless followed on purpose, and a followed one must stay inside the root given', async () => {
    const dir = await testFolder('regular-file-');
    await mkdir(path.join(dir, 'root'));
    await writeFile(path.join(dir, 'secret'), 'SECRET');
    await writeFile(path.join(dir, 'root', 'ok'), 'ok');
    await symlink(path.join(dir, 'secret'), path.join(dir, 'root', 'out'));
    await symlink('ok', path.join(dir, 'root', 'in'));
    await expect(readRegularFile(path.join(dir, 'root', 'in'))).rejects.toMatchObject({ code: 'ELOOP' });
    expect((await readRegularFile(path.join(dir, 'root', 'in'), { follow: true, inside: path.join(dir, 'root') })).toString()).toBe('ok');
    await expect(readRegularFile(path.join(dir, 'root', 'out'), { follow: true, inside: path.join(dir, 'root') })).rejects.toMatchObject({ code: 'EOUTSIDE' });
    await expect(readRegularFile(path.join(dir, 'root', 'out'), { follow: true, inside: path.join(dir, 'root') })).rejects.toThrow('leads outside');
  });

  test('a file above the cap is refused (EFBIG, with its size), a device is refused, and a file is read only up to its size when opened', async () => {
    const dir = await testFolder('regular-file-');
    const file = path.join(dir, 'f');
    await writeFile(file, 'x'.repeat(100));
    await expect(readRegularFile(file, { maxBytes: 99 })).rejects.toMatchObject({ code: 'EFBIG', bytes: 100 });
    expect((await readRegularFile(file, { maxBytes: 100 })).length).toBe(100);
    await expect(within(readRegularFile('/dev/zero', { follow: true }))).rejects.toMatchObject({ code: 'ENOTREG' });
    const { handle, size } = await openRegularFile(file);
    try {
      await appendFile(file, 'y'.repeat(50));
      expect(size).toBe(100);
    } finally {
      await handle.close();
    }
    expect(await hashRegularFile(file)).toEqual({ bytes: 150, sha256: createHash('sha256').update(await readFile(file)).digest('hex') });
    await copyRegularFile(file, path.join(dir, 'copy'));
    expect(await readFile(path.join(dir, 'copy'))).toEqual(await readFile(file));
    await expect(copyRegularFile(file, path.join(dir, 'copy'))).rejects.toMatchObject({ code: 'EEXIST' });
  });

  test('a path is inside a folder by its text: the folder itself and names starting with two dots are, .. and the folder next to it are not', () => {
    expect(isInside('/a/b', '/a/b')).toBe(true);
    expect(isInside('/a/b', '/a/b/..cache/x')).toBe(true);
    expect(isInside('/a/b', '/a/b/../c')).toBe(false);
    expect(isInside('/a/b', '/a/bc')).toBe(false);
    expect(isInside('/a/b', '/a')).toBe(false);
    expect(isStrictlyInside('/a/b', '/a/b')).toBe(false);
    expect(isStrictlyInside('/a/b', '/a/b/c')).toBe(true);
    expect(resolveInside('/a/b', 'c/../d')).toBe('/a/b/d');
    expect(resolveInside('/a/b', '../b2/x')).toBeUndefined();
    expect(resolveInside('/a/b', '/etc/passwd')).toBeUndefined();
  });
});
