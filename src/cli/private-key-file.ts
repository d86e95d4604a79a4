import { randomBytes } from 'node:crypto';
import { lstat, open, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { InvalidRequestError } from '../errors.js';

/**
 * Writes a private key line to `file`, readable by its owner only (0600 from the moment it exists: the temp file is
 * created with that mode, then renamed into place). An existing file is never replaced: it may hold the key in use.
 * @throws InvalidRequestError `INVALID_REQUEST` naming the file when it exists or cannot be written
 */
export async function writePrivateKeyFile(file: string, text: string): Promise<string> {
  const target = path.resolve(file);
  if (await lstat(target).catch(() => undefined)) {
    throw new InvalidRequestError('INVALID_REQUEST', `[INVALID_REQUEST] --out ${target} exists already; it may hold a key in use: move it away or pick another path`);
  }
  const temp = path.join(path.dirname(target), `.${path.basename(target)}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    const handle = await open(temp, 'wx', 0o600);
    try {
      await handle.writeFile(text);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, target);
  } catch (err) {
    await rm(temp, { force: true });
    throw new InvalidRequestError('INVALID_REQUEST', `[INVALID_REQUEST] --out ${target}: cannot write it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); pick a folder you may write to`);
  }
  return target;
}
