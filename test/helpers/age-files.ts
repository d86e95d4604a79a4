import { readdir, utimes } from 'node:fs/promises';
import path from 'node:path';

/*
 * Stored objects made old, as the time a run spends retained after it ends makes them: every regular file under a
 * folder store's root (or an S3 server's data folder: versitygw answers a file's time as its object's LastModified)
 * gets a modification time `ageMs` ago. The store's sweep leaves objects younger than its margin to a later pass.
 */

/** Sets the modification time of every regular file under `dir` to `ageMs` ago. @unit milliseconds */
export async function ageFiles(dir: string, ageMs = 2 * 3_600_000): Promise<void> {
  const then = new Date(Date.now() - ageMs);
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  for (const entry of entries) if (entry.isFile()) await utimes(path.join(entry.parentPath, entry.name), then, then);
}
