import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { pushBranch } from '../../src/activities/delivery/push.js';
import { namedFiles, uncommittedFiles } from '../../src/activities/workspace/git.js';
import { cloneBare, git, initRepo, writeFiles } from '../helpers/git-repo.js';
import { testFolder } from '../helpers/test-folder.js';

/*
 * A conflict or uncommitted-work report names its files in the run's state and history, which stay bounded whatever
 * the agent wrote: at most 20 names, each cut to 200 characters, and how many more there were. Real git, real
 * repositories.
 */

/** `count` files, each under a deep folder so that its path is longer than a report keeps. */
function manyFiles(count: number, content: string): Record<string, string> {
  const deep = `${'d'.repeat(120)}/${'e'.repeat(120)}`;
  return Object.fromEntries(Array.from({ length: count }, (_, i) => [`${deep}/file-${String(i).padStart(2, '0')}.txt`, content]));
}

function expectBounded(files: string[]): void {
  expect(files).toHaveLength(20);
  for (const name of files) expect(name.length).toBeLessThanOrEqual(200);
  expect(files[0]).toMatch(/^d{120}\/e+…$/);
}

describe('the files a report names', () => {
  it('are all of them when there are few, and the first 20 with how many more when there are many', () => {
    expect(namedFiles(['a.md', 'b.md'])).toEqual({ files: ['a.md', 'b.md'], text: 'a.md, b.md' });
    const many = namedFiles(Array.from({ length: 33 }, (_, i) => `f${i}`));
    expect(many.files).toEqual(Array.from({ length: 20 }, (_, i) => `f${i}`));
    expect(many.text).toMatch(/^f0, f1, .*, f19 and 13 more$/);
    expect(namedFiles(['x'.repeat(4_000)]).files[0]).toBe(`${'x'.repeat(199)}…`);
  });

  it("of a push whose rebase conflicts in 30 files are 20, each cut, and the message says 10 more", async () => {
    const base = await testFolder('conflict-files-');
    const repo = path.join(base, 'repo');
    await initRepo(repo, manyFiles(30, 'base\n'));
    const remote = path.join(base, 'remote.git');
    await cloneBare(repo, remote);
    await git(repo, 'remote', 'add', 'origin', remote);
    const other = path.join(base, 'other');
    await git(base, 'clone', '--quiet', remote, other);
    await writeFiles(other, manyFiles(30, 'theirs\n'));
    await writeFiles(repo, manyFiles(30, 'ours\n'));
    await git(other, 'commit', '--quiet', '-am', 'theirs');
    await git(other, 'push', '--quiet', 'origin', 'main');
    await git(repo, 'commit', '--quiet', '-am', 'ours');

    const pushed = await pushBranch({ dir: repo, remote: 'origin', branch: 'main', rebaseOnce: true });
    expect(pushed.kind).toBe('conflict');
    if (pushed.kind !== 'conflict') return;
    expectBounded(pushed.files);
    expect(pushed.message).toMatch(/ and 10 more$/);
    expect(pushed.message.length).toBeLessThan(5_000);
    expect(await git(repo, 'status', '--porcelain')).toBe('');
  });

  it('of a worktree holding 25 uncommitted files are 20, each cut, with 5 more', async () => {
    const repo = path.join(await testFolder('conflict-files-'), 'repo');
    await initRepo(repo, { 'a.txt': 'a\n' });
    await writeFiles(repo, manyFiles(25, 'new\n'));
    const uncommitted = await uncommittedFiles(repo);
    expectBounded(uncommitted.files);
    expect(uncommitted.text).toMatch(/ and 5 more$/);
    await git(repo, 'add', '-A');
    await git(repo, 'commit', '--quiet', '-m', 'all');
    expect(await uncommittedFiles(repo)).toEqual({ files: [], text: '' });
  });
});
