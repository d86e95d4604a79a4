import { readdirSync, type Dirent } from 'node:fs';
import path from 'node:path';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';

/** An entry of a folder {@link walkFolders} read. */
export interface WalkedEntry {
  entry: Dirent;
  /** Its path relative to the walked folder, with `/` separators. */
  key: string;
  /** Its absolute path. */
  full: string;
}

/** Options of {@link walkFolders}. */
export interface WalkOptions {
  /** Whether an entry is given (and, for a folder, entered). @default every entry */
  keep?: (key: string, entry: Dirent) => boolean;
  /** A folder that cannot be read: `throw` its error, or `skip` it. */
  unreadable: 'throw' | 'skip';
}

/**
 * The entries of `dir` and of every folder under it, one folder at a time (symlinks are entries, never followed). Each
 * folder is read with a synchronous call and the event loop is let go between folders: the workspace walks every
 * stage makes cost five times the CPU with a promise per file (40 µs a file, against 8). A folder's own entry comes
 * before what it holds.
 */
export async function* walkFolders(dir: string, options: WalkOptions): AsyncGenerator<WalkedEntry[]> {
  const pending = [''];
  for (let folderKey = pending.pop(); folderKey !== undefined; folderKey = pending.pop()) {
    const folder = path.join(dir, folderKey);
    let dirents: Dirent[];
    try {
      dirents = readdirSync(folder, { withFileTypes: true });
    } catch (err) {
      if (options.unreadable === 'skip') continue;
      throw err;
    }
    const entries: WalkedEntry[] = [];
    for (const entry of dirents) {
      const key = folderKey ? `${folderKey}/${entry.name}` : entry.name;
      if (options.keep && !options.keep(key, entry)) continue;
      entries.push({ entry, key, full: path.join(folder, entry.name) });
      if (entry.isDirectory()) pending.push(key);
    }
    yield entries;
    await yieldToEventLoop();
  }
}
