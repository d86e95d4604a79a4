import { access, constants, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * Resolves a command the way a shell would: a name with a slash is a path (relative to `cwd`), a bare
 * name is looked up in `PATH`. Returns the absolute path of an executable file, or `undefined`.
 */
export async function findExecutable(command: string, env: NodeJS.ProcessEnv, cwd = process.cwd()): Promise<string | undefined> {
  if (command.includes('/')) return (await isExecutableFile(path.resolve(cwd, command))) ? path.resolve(cwd, command) : undefined;
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.resolve(cwd, dir, command);
    if (await isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

/** True for an existing regular file this process may execute. */
export async function isExecutableFile(file: string): Promise<boolean> {
  try {
    await access(file, constants.X_OK);
    return (await stat(file)).isFile();
  } catch {
    return false;
  }
}
