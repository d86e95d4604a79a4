import { mkdir, mkdtemp, realpath, rename, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { confirmRealFolder, recheckLentFolder, resolveLentFolder, type LentFolderOptions } from '../../src/activities/workspace/lent-folder.js';
import { enclosingFolders, insideKey } from '../../src/activities/workspace/folder-nesting.js';
import { folderLeaseKey } from '../../src/activities/workspace/folder-lease.js';
import { failureOf } from '../helpers/stage-attempt.js';

/*
 * Issue 33, item 5: a lent folder (`workspace.dir`) is checked on its real path, and used by that path only. While a
 * run waited for the folder, something replaced it with a symlink leading out; the run's agent then wrote there.
 * (The attack end to end, with two runs, real Temporal and the real agent: test/integration/workspace-dir.test.ts.)
 */

let base: string;
let allowed: string;
let away: string;
beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'lent-folder-')));
  allowed = path.join(base, 'allowed');
  away = path.join(base, 'away');
  await mkdir(path.join(allowed, 'team', 'a'), { recursive: true });
  await mkdir(path.join(allowed, 'team', 'b'), { recursive: true });
  await mkdir(away);
});
afterEach(async () => rm(base, { recursive: true, force: true }));

const lent = (dir: string): LentFolderOptions => ({ root: path.join(base, 'workspaces'), runId: 'r1', dir, baseDir: base, context: {} as LentFolderOptions['context'], allowedPaths: [allowed], stageId: 'notes' });

describe('a lent folder checked at the moment of use', () => {
  it('resolves to the real path it was checked on, and refuses a symlink inside an allowed folder that leads out, naming both', async () => {
    await symlink(path.join(allowed, 'team', 'a'), path.join(allowed, 'link-in'));
    expect(await resolveLentFolder(lent(path.join(allowed, 'link-in')))).toBe(path.join(allowed, 'team', 'a'));
    await symlink(away, path.join(allowed, 'link-out'));
    const failure = await failureOf(resolveLentFolder(lent(path.join(allowed, 'link-out'))));
    expect(failure.type).toBe('CONFIG_INVALID');
    expect(failure.message).toContain(`workspace.dir names ${path.join(allowed, 'link-out')} (which leads to ${away}), a folder this worker does not lend to runs`);
  });

  it('refuses a folder replaced by a symlink after its check, even one leading to another allowed folder', async () => {
    const folder = path.join(allowed, 'team', 'a');
    const checked = await resolveLentFolder(lent(folder));
    await rename(folder, `${folder}.orig`);
    await symlink(path.join(allowed, 'team', 'b'), folder);
    const failure = await failureOf(recheckLentFolder(lent(folder), checked));
    expect(failure.type).toBe('CONFIG_INVALID');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain(`workspace.dir ${folder} changed while the run waited for it: it was checked as ${checked} and now leads to ${path.join(allowed, 'team', 'b')}`);
  });

  it('refuses a folder whose parent was swapped for a symlink just before the agent starts, and a folder gone', async () => {
    const folder = path.join(allowed, 'team', 'a');
    const checked = await resolveLentFolder(lent(folder));
    await expect(confirmRealFolder(checked, 'notes')).resolves.toBeUndefined();
    await rename(path.join(allowed, 'team'), path.join(allowed, 'team.orig'));
    await mkdir(path.join(away, 'a'));
    await symlink(away, path.join(allowed, 'team'));
    expect((await failureOf(confirmRealFolder(checked, 'notes'))).message).toContain(`now leads to ${path.join(away, 'a')}`);
    await rm(path.join(allowed, 'team'));
    expect((await failureOf(confirmRealFolder(checked, 'notes'))).message).toContain('now leads to nothing (ENOENT)');
  });
});

describe('folders lent to runs at once never nest', () => {
  it('knows the folders around a folder, from the root down', () => {
    expect(enclosingFolders('/srv/work/a')).toEqual(['/', '/srv', '/srv/work']);
    expect(enclosingFolders('/')).toEqual([]);
  });

  it('names a folder\'s own key and the mark of the folders inside it apart, hashing paths too long for a key', () => {
    expect(folderLeaseKey('/srv/work')).toBe('workspace.dir:/srv/work');
    expect(insideKey('q', '/srv/work')).toBe('workspace.dir.inside@q:/srv/work');
    expect(insideKey('q', `/${'x'.repeat(300)}`)).toMatch(/^workspace\.dir\.inside@q:sha256:[0-9a-f]{32}$/);
  });
});
