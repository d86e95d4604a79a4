import { lstatSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { runConfined } from '../process/confined.js';
import { walkFolders } from '../workspace/folder-walk.js';

/*
 * Folders as tar archives, through GNU tar with arguments of our making only. The worker lists what goes in itself
 * (regular files, folders and symlinks inside the folder, never following a link: a link is stored as a link), and
 * hands tar that list with `--no-recursion --verbatim-files-from --null`, so no name is ever read as an option and
 * nothing beyond the list is walked; tar runs where it sees only the folder (process/confined.ts), so a link swapped in
 * after the listing leads nowhere. Extraction goes into a fresh empty folder, as the worker's user, with no owner or
 * special permission bits from the archive; GNU tar refuses members with `..` and strips leading `/`.
 */

/** Thrown when a folder to archive holds more than the checkpoint cap allows. */
export class ArchiveTooLargeError extends Error {
  override readonly name = 'ArchiveTooLargeError';
}

/** What {@link listFolder} found. */
export interface FolderListing {
  /** Paths relative to the folder, `./`-prefixed, folders before what they hold. */
  entries: string[];
  /** What each entry is, by its path. */
  kinds: Map<string, 'dir' | 'file' | 'link'>;
  /** Bytes of the regular files. */
  bytes: number;
  /** Each regular file's size and modification time (ns) when listed: what tells a later listing it changed. */
  signatures: Map<string, string>;
}

/** Options of {@link listFolder}. */
export interface ListOptions {
  /** Stops (ArchiveTooLargeError) once the files add up to more. @unit bytes */
  maxBytes: number;
  /** Relative paths (with `/`) left out, with everything below them. */
  skip?: (relative: string) => boolean;
}

/** Every regular file, folder and symlink under `dir` (symlinks not followed; sockets and devices left out). */
export async function listFolder(dir: string, options: ListOptions): Promise<FolderListing> {
  const listing: FolderListing = { entries: [], kinds: new Map(), bytes: 0, signatures: new Map() };
  const add = (entry: string, kind: 'dir' | 'file' | 'link') => {
    listing.entries.push(entry);
    listing.kinds.set(entry, kind);
  };
  const keep = options.skip && ((key: string): boolean => !options.skip!(key));
  for await (const entries of walkFolders(dir, { keep, unreadable: 'throw' })) {
    for (const { entry, key, full } of entries) {
      if (entry.isDirectory()) {
        add(`./${key}`, 'dir');
      } else if (entry.isSymbolicLink()) {
        add(`./${key}`, 'link');
      } else if (entry.isFile()) {
        const info = lstatSync(full, { bigint: true });
        listing.bytes += Number(info.size);
        if (listing.bytes > options.maxBytes) throw new ArchiveTooLargeError(`${dir} holds more than ${options.maxBytes} bytes of files`);
        add(`./${key}`, 'file');
        listing.signatures.set(`./${key}`, `${info.size}:${info.mtimeNs}`);
      }
    }
  }
  return listing;
}

/** Writes the tar archive `archive` of `entries` (as {@link listFolder} gives them) of `dir`. */
export async function createArchive(dir: string, entries: string[], archive: string): Promise<void> {
  const list = `${archive}.list`;
  await writeFile(list, entries.map((entry) => `${entry}\0`).join(''));
  // A file the agent removes between the listing and tar's read is left out, not a failed checkpoint. POSIX (pax)
  // headers keep modification times to the nanosecond, as a restored file must have them: a stage resumed on another
  // host tells the files it wrote from the ones it found by them (gnu headers keep whole seconds).
  const args = [
    '--create', '--file', archive, '--directory', dir, '--format=posix', '--pax-option=delete=atime,delete=ctime',
    '--no-recursion', '--ignore-failed-read', '--null', '--verbatim-files-from', '--files-from', list,
  ];
  // tar opens each listed name by its path, and a stage running alongside may swap a folder on that path for a
  // symlink after the listing: confined, the link leads to nothing of the worker's (its home, other runs).
  const folders = { readOnly: [dir], writable: [path.dirname(archive)] };
  const result = await runConfined('tar', args, folders, (file, argv) => execa(file, argv, { reject: false, env: tarEnvironment(), extendEnv: false }));
  if (result.failed) throw new Error(`tar could not archive ${dir}: ${String(result.stderr).slice(-1_000)}`);
}

/** Unpacks `archive` into the empty folder `into`, which must exist. */
export async function extractArchive(archive: string, into: string): Promise<void> {
  const result = await execa(
    'tar',
    ['--extract', '--file', archive, '--directory', into, '--no-same-owner', '--no-same-permissions', '--no-overwrite-dir', '--delay-directory-restore'],
    { reject: false, env: tarEnvironment(), extendEnv: false },
  );
  if (result.failed) throw new Error(`tar could not unpack ${archive}: ${String(result.stderr).slice(-1_000)}`);
}

/** tar needs only to find itself; no worker secret reaches it. */
function tarEnvironment(): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C' };
}
