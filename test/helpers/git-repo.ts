import { execa } from 'execa';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

/*
 * The git repositories tests run pipelines on. The author is given on each command (`-c`), never written into the
 * repository's config: the worker looks for `user.email` there to decide whether to commit under its own name.
 */

const AUTHOR = ['-c', 'user.name=Test Person', '-c', 'user.email=test@localhost'];

/** Runs `git <args>` in `cwd` as the test author; resolves to its stdout. @throws the execa error when git fails */
export async function git(cwd: string, ...args: string[]): Promise<string> {
  return (await execa('git', [...AUTHOR, ...args], { cwd })).stdout;
}

/**
 * Makes `dir` (created when missing) a git repository on `main` whose one commit, "initial", holds what `dir`
 * already contains plus `files` (path → content).
 */
export async function initRepo(dir: string, files: Record<string, string> = {}): Promise<void> {
  await mkdir(dir, { recursive: true });
  await git(dir, 'init', '--quiet', '--initial-branch', 'main');
  await writeFiles(dir, files);
  await git(dir, 'add', '.');
  await git(dir, 'commit', '--quiet', '-m', 'initial');
}

/** Writes `files` (path → content) into `dir`, making their folders; nothing is committed. */
export async function writeFiles(dir: string, files: Record<string, string>): Promise<void> {
  for (const [file, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await writeFile(path.join(dir, file), content);
  }
}

/** Clones `repo` into a bare repository at `remote`: a remote to push to that needs no network. */
export async function cloneBare(repo: string, remote: string): Promise<void> {
  await git(path.dirname(remote), 'clone', '--quiet', '--bare', repo, remote);
}
