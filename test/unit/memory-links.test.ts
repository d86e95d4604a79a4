import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { refuseLinkedMemoryFiles } from '../../src/activities/backends/claude-cli/memory-links.js';

let scratch: string;
let workspace: string;
let secret: string;
beforeEach(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'memory-links-'));
  workspace = path.join(scratch, 'ws');
  secret = path.join(scratch, 'worker-key');
  await mkdir(path.join(workspace, 'sub', 'deeper'), { recursive: true });
  await writeFile(secret, 'WORKER-KEY\n', { mode: 0o600 });
  await writeFile(path.join(workspace, 'CLAUDE.md'), 'Project notes.\n');
  await writeFile(path.join(workspace, 'sub', 'notes.md'), 'Inside.\n');
});
afterEach(() => rm(scratch, { recursive: true, force: true }));

describe("a workspace's memory files", () => {
  test('regular files, and links that stay inside the workspace, are let be', async () => {
    await symlink('../notes.md', path.join(workspace, 'sub', 'deeper', 'CLAUDE.md'));
    await symlink(path.join(scratch, 'worker-key'), path.join(workspace, 'sub', 'key-link.txt'));
    await expect(refuseLinkedMemoryFiles('look', workspace)).resolves.toBeUndefined();
  });

  test("a folder's CLAUDE.md, CLAUDE.local.md or AGENTS.md that leads outside, or nowhere, fails the stage naming it", async () => {
    await symlink(secret, path.join(workspace, 'sub', 'AGENTS.md'));
    await expect(refuseLinkedMemoryFiles('look', workspace)).rejects.toThrow(/the workspace's sub\/AGENTS\.md is a symlink leading outside the workspace/);
    await rm(path.join(workspace, 'sub', 'AGENTS.md'));
    await symlink(secret, path.join(workspace, 'sub', 'deeper', 'CLAUDE.local.md'));
    await expect(refuseLinkedMemoryFiles('look', workspace)).rejects.toThrow(
      /\[CONFIG_INVALID\] stage look: the workspace's sub\/deeper\/CLAUDE\.local\.md is a symlink leading outside the workspace/,
    );
    await rm(path.join(workspace, 'sub', 'deeper', 'CLAUDE.local.md'));
    await symlink(path.join(scratch, 'gone'), path.join(workspace, 'sub', 'CLAUDE.md'));
    await expect(refuseLinkedMemoryFiles('look', workspace)).rejects.toThrow(/sub\/CLAUDE\.md is a symlink leading nowhere/);
  });

  test("git's folder and node_modules are not walked", async () => {
    await mkdir(path.join(workspace, 'node_modules', 'pkg'), { recursive: true });
    await symlink(secret, path.join(workspace, 'node_modules', 'pkg', 'CLAUDE.md'));
    await expect(refuseLinkedMemoryFiles('look', workspace)).resolves.toBeUndefined();
  });
});
