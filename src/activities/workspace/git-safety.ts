/**
 * How the worker runs git in a run's workspace without running what the workspace plants. A run's folder is a
 * worktree the agent writes to: a hook, `core.fsmonitor`, an external diff or an ssh command named by the repository's
 * config (or by a `.git` the agent rewrote) would otherwise run inside the worker, outside the agent's sandbox, with
 * the worker's secrets in its environment. So every git the worker runs gets both:
 *
 * - {@link safeGitArgs}: config given on the command line, which wins over every config file, switching off the
 *   programs a repository can name; the repository owner's own hooks are off too (stage commits, merges and pushes
 *   run no hook; docs/security.md says why).
 * - {@link gitEnvironment}: an environment built from nothing (run it with `extendEnv: false`): what git itself needs,
 *   where the operator keeps git's settings, and for the operations that reach a remote the credentials they need.
 *   Anything that still runs finds no worker secret.
 */

/**
 * Config that wins over every config file: no hook, no fsmonitor daemon, no `ext::` remote running a command, and no
 * git started inside a submodule. A folder holding a `.git` that the index records as a submodule is one the agent
 * can fill with a repository of its making; a git started there reads that repository's config (a clean filter
 * runs). These settings reach such a child git too (git passes `-c` on), but cannot switch off what its own config
 * names, so no child may start: no recursion (`submodule.recurse`, fetch and push), no dirtiness check
 * (`diff.ignoreSubmodules`, which a `.gitmodules` in the worktree can override: the flags below cannot be), no
 * summary, no submodule diff.
 */
const OVERRIDES: ReadonlyArray<readonly [string, string]> = [
  ['core.hooksPath', '/dev/null'],
  ['core.fsmonitor', 'false'],
  ['protocol.ext.allow', 'never'],
  ['submodule.recurse', 'false'],
  ['diff.ignoreSubmodules', 'all'],
  ['status.submoduleSummary', 'false'],
  ['diff.submodule', 'short'],
  ['fetch.recurseSubmodules', 'false'],
  ['push.recurseSubmodules', 'no'],
];

/** Subcommands that print diffs: an external diff or a textconv driver from config would run for them. */
const DIFFING = new Set(['diff', 'log', 'show']);

/**
 * Options each subcommand gets right after its name. A diff never runs an external diff, a textconv driver or a git
 * inside a submodule; a status neither; a push, pull or fetch never recurses into submodules. On the command line,
 * they win over `submodule.<name>.ignore` in a `.gitmodules` the agent can write.
 */
const SUBCOMMAND_OPTIONS: Readonly<Record<string, readonly string[]>> = {
  ...Object.fromEntries([...DIFFING].map((name) => [name, ['--no-ext-diff', '--no-textconv', '--ignore-submodules=all']])),
  status: ['--ignore-submodules=all'],
  push: ['--recurse-submodules=no'],
  pull: ['--no-recurse-submodules'],
  fetch: ['--no-recurse-submodules'],
};

/** `args` of one git command with the overrides before it, and its subcommand's {@link SUBCOMMAND_OPTIONS} after its name. */
export function safeGitArgs(args: readonly string[]): string[] {
  // The subcommand is the first argument that is not a `-c name=value` pair (ours, or FALLBACK_IDENTITY's).
  let at = 0;
  while (args[at] === '-c') at += 2;
  const subcommand = args[at];
  const options = subcommand !== undefined && Object.hasOwn(SUBCOMMAND_OPTIONS, subcommand) ? SUBCOMMAND_OPTIONS[subcommand] : [];
  const rest = subcommand === undefined ? [] : [subcommand, ...options, ...args.slice(at + 1)];
  return [...OVERRIDES.flatMap(([name, value]) => ['-c', `${name}=${value}`]), ...args.slice(0, at), ...rest];
}

/** What any git needs: finding programs, the user's home (`~/.gitconfig`, `~/.ssh`), the locale, a temp folder. */
const BASE_VARIABLES = ['PATH', 'HOME', 'USER', 'LOGNAME', 'LANG', 'LC_ALL', 'LC_CTYPE', 'LC_MESSAGES', 'TMPDIR', 'TZ'];
/** Where the operator may have put git's own settings: they are the operator's, so they stay. */
const CONFIG_VARIABLES = ['XDG_CONFIG_HOME', 'GIT_CONFIG_GLOBAL', 'GIT_CONFIG_SYSTEM', 'GIT_CONFIG_NOSYSTEM'];
/**
 * What a push or pull needs to reach and authenticate to a remote: ssh's agent, a proxy, CA certificates, an askpass
 * program, and the token `gh auth git-credential` (a credential helper `gh auth setup-git` installs) reads.
 */
const REMOTE_VARIABLES = [
  'SSH_AUTH_SOCK',
  'GIT_SSH_VARIANT',
  'GIT_ASKPASS',
  'SSH_ASKPASS',
  'GH_TOKEN',
  'GITHUB_TOKEN',
  'GH_ENTERPRISE_TOKEN',
  'GITHUB_ENTERPRISE_TOKEN',
  'GH_HOST',
  'GH_CONFIG_DIR',
  'GIT_SSL_CAINFO',
  'GIT_SSL_CAPATH',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  ...['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'ALL_PROXY'].flatMap((name) => [name, name.toLowerCase()]),
];

/**
 * The git directory of each worktree the worker opened, found from its repository (`pinWorktree` in git.ts), never
 * from the worktree's own `.git` file: that file is in the agent's reach, and pointed at a git directory of the
 * agent's making it would hand git a config, hooks and attributes drivers of the agent's choosing.
 */
const pinnedGitDirs = new Map<string, string>();

/** Records `gitDir` as the git directory of the worktree `dir`, for every later git there. */
export function pinGitDir(dir: string, gitDir: string): void {
  pinnedGitDirs.set(dir, gitDir);
}

/** Forgets `dir`'s git directory (its worktree was removed). */
export function unpinGitDir(dir: string): void {
  pinnedGitDirs.delete(dir);
}

/** The git directory the worker found for the worktree at `dir` when it opened it; undefined when it did not. */
export function pinnedGitDir(dir: string): string | undefined {
  return pinnedGitDirs.get(dir);
}

/** `GIT_DIR` and `GIT_WORK_TREE` for a git in `dir` when the worker opened it as a worktree; otherwise nothing. */
export function pinnedGitEnvironment(dir: string): Record<string, string> {
  const gitDir = pinnedGitDir(dir);
  return gitDir ? { GIT_DIR: gitDir, GIT_WORK_TREE: dir } : {};
}

/** What a git command does with the network: only `remote` commands (push, pull) get credentials. */
export type GitAccess = 'local' | 'remote';

/**
 * The whole environment of one git command, from the worker's `env`. `GIT_SSH_COMMAND` is always set (the
 * operator's, or their `GIT_SSH` program, or plain `ssh`): the variable wins over `core.sshCommand`, so a
 * repository's ssh command never runs. The overrides are also given as `GIT_CONFIG_COUNT`/`_KEY_n`/`_VALUE_n`, so a
 * git that another program starts in the workspace (`gh pr create` runs `git status`) runs none of it either.
 */
export function gitEnvironment(env: NodeJS.ProcessEnv, access: GitAccess = 'local'): Record<string, string> {
  const names = access === 'remote' ? [...BASE_VARIABLES, ...CONFIG_VARIABLES, ...REMOTE_VARIABLES] : [...BASE_VARIABLES, ...CONFIG_VARIABLES];
  const picked: Record<string, string> = {};
  for (const name of names) if (env[name] !== undefined) picked[name] = env[name];
  const sshProgram = env.GIT_SSH ? `'${env.GIT_SSH.replace(/'/g, `'\\''`)}'` : 'ssh';
  const overrides = Object.fromEntries(OVERRIDES.flatMap(([name, value], i) => [[`GIT_CONFIG_KEY_${i}`, name], [`GIT_CONFIG_VALUE_${i}`, value]]));
  return { ...picked, GIT_TERMINAL_PROMPT: '0', GIT_SSH_COMMAND: env.GIT_SSH_COMMAND || sshProgram, GIT_CONFIG_COUNT: String(OVERRIDES.length), ...overrides };
}

/**
 * `env` (made by {@link gitEnvironment}) with `settings` given as config variables before the worker's overrides, which
 * still win: how the operator's own settings reach a git that cannot read their files (operator-git-settings.ts).
 */
export function withSettingsBefore(env: Record<string, string>, settings: ReadonlyArray<readonly [string, string]>): Record<string, string> {
  const all = [...settings, ...OVERRIDES];
  const numbered = Object.fromEntries(all.flatMap(([name, value], i) => [[`GIT_CONFIG_KEY_${i}`, name], [`GIT_CONFIG_VALUE_${i}`, value]]));
  return { ...env, ...numbered, GIT_CONFIG_COUNT: String(all.length) };
}
