import { findExecutable } from './find-executable.js';

/*
 * Programs the worker runs over a run's files (tar archiving a run's folder, git staging a worktree) open each file by
 * its path, following the links in the folders above it. A stage running alongside may swap one of those folders for a
 * symlink between the program's look and its open: a link's text names any path, the worker's `~/.ssh` that the agent's
 * sandbox hides from it included, and git followed it and wrote the key into the repository the agent reads. So such a
 * program runs in bubblewrap, where it sees only the system's programs and the folders it works on: no home, no /etc,
 * no /proc, no other run. A link swapped in leads to nothing of the worker's. A host where bubblewrap cannot make its
 * namespaces runs no sandboxed agent either: there the program runs as it is.
 */

/** What a confined program sees besides the system's programs: absolute paths, each at its own place. */
export interface ConfinedFolders {
  readOnly?: readonly string[];
  /** Read-only where they exist (a settings file the operator may not have). */
  readOnlyIfPresent?: readonly string[];
  writable?: readonly string[];
}

const SYSTEM_FOLDERS = ['/usr', '/bin', '/lib', '/lib64', '/lib32', '/libx32'];

/** bubblewrap's arguments for a program that sees only the system's programs, a private /dev and /tmp, and `folders`. */
export function confinedArgs(folders: ConfinedFolders): string[] {
  const bind = (option: string, list: readonly string[] | undefined) => (list ?? []).flatMap((folder) => [option, folder, folder]);
  return [
    '--unshare-all', '--die-with-parent', '--new-session',
    ...bind('--ro-bind-try', SYSTEM_FOLDERS), '--dev', '/dev', '--tmpfs', '/tmp',
    ...bind('--ro-bind', folders.readOnly), ...bind('--ro-bind-try', folders.readOnlyIfPresent), ...bind('--bind', folders.writable),
  ];
}

/**
 * Runs `command args` through `spawn`, in bubblewrap confined to `folders` where the host has it, else (no bubblewrap,
 * or one that cannot make its namespaces here) as it is.
 */
export async function runConfined<R extends { failed: boolean; stderr?: unknown }>(
  command: string,
  args: readonly string[],
  folders: ConfinedFolders,
  spawn: (file: string, args: string[]) => Promise<R>,
): Promise<R> {
  const bwrap = process.platform === 'linux' ? await findExecutable('bwrap', { PATH: process.env.PATH ?? '/usr/bin:/bin' }) : undefined;
  const result = bwrap ? await spawn(bwrap, [...confinedArgs(folders), '--', command, ...args]) : undefined;
  if (!result || (result.failed && /^bwrap:/m.test(String(result.stderr)))) return spawn(command, [...args]);
  return result;
}
