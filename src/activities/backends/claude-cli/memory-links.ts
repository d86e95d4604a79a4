import { realpath } from 'node:fs/promises';
import { stageFailure } from '../../failures.js';
import { walkFolders } from '../../workspace/folder-walk.js';
import { isInside } from '../../../files/inside.js';

/*
 * Claude Code reads a workspace's memory files itself, in its own process and not in the sandbox: CLAUDE.md and
 * CLAUDE.local.md (AGENTS.md where a folder has no CLAUDE.md) at the start, and those of a folder once the agent touches
 * a file there. It follows a symlink, so a repository's `CLAUDE.md -> /home/worker/.ssh/id_ed25519` (git keeps
 * symlinks) would put the worker's key in the model's context, and the agent's answer could carry it back to whoever
 * started the run. Claude Code reads a memory file only where the agent's file tools may read (the Read deny rules and
 * the working-folder block of agent-reads.ts apply to it: seen with the pinned CLI), which stops that; a link leading
 * out of the workspace still fails the stage before its agent starts, so the run says why rather than losing its
 * memory file without a word, and nothing rests on that one check of Claude Code's.
 */

/** The names Claude Code reads as memory in any folder of its working folder (and in a folder's `.claude`). */
const MEMORY_NAMES = ['CLAUDE.md', 'CLAUDE.local.md', 'AGENTS.md'];
const MEMORY_FILES = new Set(MEMORY_NAMES);

/** The memory files Claude Code reads in its working folder when it starts. */
export const STARTUP_MEMORY_FILES = [...MEMORY_NAMES, '.claude/CLAUDE.md', '.claude/AGENTS.md'];

/** Folders no memory file is looked for in: git's own, and the dependencies a walk would take long over. */
const NOT_WALKED = new Set(['.git', 'node_modules']);

/**
 * Fails the stage when a memory file in the workspace is a symlink leading out of it (or nowhere it can resolve).
 * @throws CONFIG_INVALID naming the file
 */
export async function refuseLinkedMemoryFiles(stageId: string, workspaceDir: string): Promise<void> {
  // A workspace not made yet holds no memory file.
  const root = await realpath(workspaceDir).catch(() => undefined);
  if (root === undefined) return;
  const keep = (_key: string, entry: { name: string; isDirectory(): boolean; isSymbolicLink(): boolean }): boolean =>
    entry.isDirectory() ? !NOT_WALKED.has(entry.name) : MEMORY_FILES.has(entry.name) && entry.isSymbolicLink();
  for await (const entries of walkFolders(workspaceDir, { keep, unreadable: 'skip' })) {
    for (const { entry, key, full } of entries) {
      if (entry.isDirectory()) continue;
      const target = await realpath(full).catch(() => undefined);
      if (target !== undefined && isInside(root, target)) continue;
      throw stageFailure({
        type: 'CONFIG_INVALID',
        stageId,
        message: `the workspace's ${key} is a symlink leading ${target === undefined ? 'nowhere' : 'outside the workspace'}: Claude Code reads memory files itself, outside the sandbox, and a link must not choose what it reads`,
        hint: `make ${key} a regular file in the repository or the stage that wrote it (or remove it)`,
        details: { file: key },
      });
    }
  }
}
