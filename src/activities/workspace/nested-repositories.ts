import type { Dirent } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { OLD_BOOKKEEPING_DIR } from './run-folder.js';

/*
 * A git repository an agent makes inside the run's worktree (`git init sub`, or a `.git` written into a folder the
 * repository tracks as a submodule) carries a config of the agent's choosing. Once the worker's git treats that folder
 * as a submodule, it checks whether it is dirty by starting another git inside it, which reads that config: a clean
 * filter (`filter.<name>.clean`, picked by the nested repository's `.gitattributes`) then runs as the worker's user,
 * outside the sandbox. `git add` has no `--ignore-submodules`, `-c` cannot switch off a filter whose name the agent
 * picks, and a `.gitmodules` in the worktree overrides `diff.ignoreSubmodules`. So the worker looks for such
 * repositories itself, with no git, before it stages anything (and before `gh`, whose own `git status` it cannot give
 * options), and refuses rather than leaving them out: a stage commit without a folder the agent's work needs would be
 * a broken commit that looks complete, pushed and proposed as one, while the refusal names the folder and the fix.
 */

/** Upper bound of the files and folders one look at a worktree reads; beyond it the worktree is refused unread. */
export const MAX_SCANNED_ENTRIES = 500_000;

/** Upper bound of the folders a refusal names (the count says how many more there are). */
const MAX_NAMED = 10;

/** What a look at a worktree found. */
export interface NestedRepositoryScan {
  /** Folders holding a `.git` (a folder, a file or a symlink), relative to the worktree with `/` separators, sorted. */
  folders: string[];
  /** Folders that could not be read, so whether they hold one is unknown. */
  unreadable: string[];
  /** The scan stopped at {@link MAX_SCANNED_ENTRIES}: the worktree holds more than it reads. */
  truncated: boolean;
}

export interface NestedRepositoryScanOptions {
  /** Upper bound of the entries read. @default MAX_SCANNED_ENTRIES */
  maxEntries?: number;
}

/**
 * Finds every `.git` below the worktree `dir` (its own `.git` and the worker's bookkeeping folder aside, which the
 * worker's `git add` excludes by pathspec), at any depth. Symlinks are never followed: git does not follow them either,
 * it records a symlink as a symlink. Reads at most `maxEntries` entries.
 */
export async function findNestedRepositories(dir: string, options: NestedRepositoryScanOptions = {}): Promise<NestedRepositoryScan> {
  const maxEntries = options.maxEntries ?? MAX_SCANNED_ENTRIES;
  const scan: NestedRepositoryScan = { folders: [], unreadable: [], truncated: false };
  const pending = [''];
  let seen = 0;
  // An explicit stack, not recursion: a folder chain thousands deep must not exhaust the call stack.
  for (let folder = pending.pop(); folder !== undefined; folder = pending.pop()) {
    const entries = await readFolder(path.join(dir, folder));
    if (entries === 'unreadable') scan.unreadable.push(folder || '.');
    if (!Array.isArray(entries)) continue;
    seen += entries.length;
    if (seen > maxEntries) {
      scan.truncated = true;
      break;
    }
    // Any case: on a case-insensitive disk (macOS) git finds `.GIT` as `.git`.
    if (folder !== '' && entries.some((entry) => entry.name.toLowerCase() === '.git')) {
      // Refused as a whole: what lies inside it does not matter.
      scan.folders.push(folder);
      continue;
    }
    for (const entry of entries) {
      if (!entry.isDirectory() || (folder === '' && (entry.name === '.git' || entry.name === OLD_BOOKKEEPING_DIR))) continue;
      pending.push(folder === '' ? entry.name : `${folder}/${entry.name}`);
    }
  }
  scan.folders.sort();
  scan.unreadable.sort();
  return scan;
}

/** A folder's entries; `gone` when it vanished meanwhile (nothing to find there), `unreadable` for any other error. */
async function readFolder(folder: string): Promise<Dirent[] | 'gone' | 'unreadable'> {
  try {
    return await readdir(folder, { withFileTypes: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? 'gone' : 'unreadable';
  }
}

/** Why a worktree is refused, and what a person does about it. */
export interface ScanVerdict {
  reason: string;
  fix: string;
}

/** Thrown when a worktree holds a git repository the worker did not make (or could not be checked for one). */
export class NestedRepositoryError extends Error {
  override readonly name = 'NestedRepositoryError';
  constructor(
    /** What the worker did not do, and why. */
    readonly reason: string,
    /** What a person does about it. */
    readonly fix: string,
    /** What the look found. */
    readonly scan: NestedRepositoryScan,
  ) {
    super(`${reason}; ${fix}`);
  }
}

/**
 * Refuses a worktree that holds another git repository, or that could not be checked for one (an unreadable folder,
 * more entries than {@link MAX_SCANNED_ENTRIES}): the worker's git must not run there.
 * @param action what the worker was about to do, for the message ("commit the stage's work")
 * @throws NestedRepositoryError naming the folders and what to do
 */
export async function refuseNestedRepositories(dir: string, action: string, options: NestedRepositoryScanOptions = {}): Promise<void> {
  const scan = await findNestedRepositories(dir, options);
  const verdict = judgeScan(scan, options.maxEntries ?? MAX_SCANNED_ENTRIES);
  if (verdict) throw new NestedRepositoryError(`the worker did not ${action}: ${verdict.reason}`, verdict.fix, scan);
}

/** Why the scan refuses the worktree, and the fix; `undefined` when it found nothing. */
export function judgeScan(scan: NestedRepositoryScan, maxEntries: number = MAX_SCANNED_ENTRIES): ScanVerdict | undefined {
  const named = (folders: string[]) =>
    `${folders.slice(0, MAX_NAMED).map((folder) => JSON.stringify(folder)).join(', ')}${folders.length > MAX_NAMED ? ` and ${folders.length - MAX_NAMED} more` : ''}`;
  if (scan.folders.length > 0) {
    return {
      reason: `the workspace holds a git repository the agent made (a .git in ${named(scan.folders)}), whose config would make the worker's git run programs outside the sandbox`,
      fix: 'remove that .git (or its folder) from the workspace, or have the agent keep clones and scratch repositories outside it (in $TMPDIR)',
    };
  }
  if (scan.unreadable.length > 0) {
    return {
      reason: `the folders ${named(scan.unreadable)} of the workspace could not be read, so they could not be checked for a git repository the agent made`,
      fix: 'make them readable (chmod u+rx) or remove them',
    };
  }
  if (scan.truncated) {
    return {
      reason: `the workspace holds more than ${maxEntries} files and folders, too many to check for a git repository the agent made`,
      fix: 'remove generated folders (dependencies, build output) from it',
    };
  }
  return undefined;
}
