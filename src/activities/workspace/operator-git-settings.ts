import path from 'node:path';
import { execa } from 'execa';

/*
 * The operator's own git settings (the system and global config files, with what they include) for a git that cannot
 * read those files: a confined git (process/confined.ts) sees no home and no /etc, so that no link an agent plants in a
 * worktree leads it to them (a global config may hold a token, `http.extraHeader`). They reach it as variables
 * instead, which no path leads to (it has no /proc), and the ignore and attributes files they name, which hold patterns
 * only, at their own paths: staging a worktree confined ignores and filters (git-lfs) the files it did before.
 */

/** What {@link readOperatorGitSettings} found. */
export interface OperatorGitSettings {
  /** Each setting's name and value, in the order git reads them. */
  settings: [string, string][];
  /** The global ignore and attributes files (absolute paths; they may not exist). */
  files: string[];
}

/**
 * The system and global settings of the git that `env` (a git environment, git-safety.ts) gives, read outside any
 * repository; none when git cannot list them.
 */
export async function readOperatorGitSettings(env: Record<string, string>): Promise<OperatorGitSettings> {
  // Outside any repository, and with the worker's own overrides switched off: only the system and global scopes are left.
  const { GIT_DIR: _gitDir, GIT_WORK_TREE: _workTree, GIT_INDEX_FILE: _index, ...outside } = env;
  const listed = await execa('git', ['config', '--list', '--includes', '--show-scope', '-z'], {
    cwd: '/',
    env: { ...outside, GIT_CONFIG_COUNT: '0' },
    extendEnv: false,
    reject: false,
    stdin: 'ignore',
  });
  const settings: [string, string][] = [];
  const fields = listed.failed ? [] : String(listed.stdout).split('\0');
  // `-z` gives `scope NUL name NL value NUL`; a name alone is a boolean set true (`[core] bare`).
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] !== 'system' && fields[i] !== 'global') continue;
    const entry = fields[i + 1]!;
    const at = entry.indexOf('\n');
    settings.push(at < 0 ? [entry, 'true'] : [entry.slice(0, at), entry.slice(at + 1)]);
  }
  return { settings, files: namedFiles(settings, env) };
}

/** The ignore and attributes files the settings name, else git's defaults in `$XDG_CONFIG_HOME/git/`. */
function namedFiles(settings: [string, string][], env: Record<string, string>): string[] {
  const home = env.HOME;
  const config = env.XDG_CONFIG_HOME || (home ? path.join(home, '.config') : undefined);
  const last = (name: string) => settings.filter(([key]) => key === name).at(-1)?.[1];
  const expand = (file: string | undefined) => (file?.startsWith('~/') && home ? path.join(home, file.slice(2)) : file);
  const files = [
    expand(last('core.excludesfile')) ?? (config && path.join(config, 'git', 'ignore')),
    expand(last('core.attributesfile')) ?? (config && path.join(config, 'git', 'attributes')),
  ];
  return files.filter((file): file is string => file !== undefined && path.isAbsolute(file));
}
