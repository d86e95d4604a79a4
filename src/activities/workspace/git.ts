import { existsSync } from 'node:fs';
import { readdir, realpath } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { stageFailure } from '../failures.js';
import { watchFifoWait } from '../process/fifo-wait.js';
import { runConfined } from '../process/confined.js';
import { gitEnvironment, pinGitDir, pinnedGitDir, pinnedGitEnvironment, safeGitArgs, withSettingsBefore, type GitAccess } from './git-safety.js';
import { withLock } from './keyed-lock.js';
import { refuseNestedRepositories } from './nested-repositories.js';
import { readOperatorGitSettings } from './operator-git-settings.js';
import { readOwnFile } from './own-files.js';
import { OLD_BOOKKEEPING_DIR } from './run-folder.js';
import { shellWord } from '../../pipeline/shell-words.js';

/** A run workspace that is a git worktree of a repository, on the run's own branch. */
export interface WorktreeOptions {
  /** Absolute path of the repository (`pipeline.workspace.repo`, resolved). */
  repo: string;
  /** The run's branch, already rendered (`agent/<run id>`). */
  branch: string;
  /** The commit or branch the worktree starts from. @default HEAD */
  base?: string;
}

/** The identity used for stage commits when the repository configures none. */
export const FALLBACK_IDENTITY = ['-c', 'user.name=agent-pipeline', '-c', 'user.email=agent-pipeline@localhost'];


/** Thrown when a git command the workspace needs failed for a reason git explains (a lock, local changes). */
export class GitError extends Error {
  override readonly name = 'GitError';
  constructor(
    message: string,
    /** What git printed on stderr (or stdout when stderr was empty). */
    readonly output: string,
  ) {
    super(message);
  }
}

/**
 * Runs git in `cwd` without prompting for credentials; never throws for a git failure (`reject: false`). Nothing the
 * workspace plants runs (no hooks, no fsmonitor, no external diff or ssh command from its config), and git gets a
 * minimal environment: no worker secret, except the credentials a `remote` command (push, pull) needs. In a worktree
 * the worker opened, git uses the git directory {@link pinWorktree} found, not the one `cwd/.git` names. See git-safety.ts.
 */
export async function git(cwd: string, args: string[], access: GitAccess = 'local', extraEnv: Record<string, string> = {}, input?: string) {
  // `extraEnv` is the worker's own (a checkpoint's temporary GIT_INDEX_FILE), never a value a run brings; so is `input`.
  const env = { ...gitEnvironment(process.env, access), ...pinnedGitEnvironment(cwd), ...extraEnv };
  return spawnGit(cwd, 'git', safeGitArgs(args), env, input);
}

/**
 * Stages everything in the worktree `dir` but what `pathspec` excludes (`git add --all -- <pathspec>`), with git
 * confined (process/confined.ts) to the worktree (read-only), its repository's git directory and `writable` (a
 * checkpoint's own index): git opens each file it found by its path, and a folder an agent swaps for a link meanwhile
 * leads to nothing of the worker's. The operator's git settings reach it as variables (operator-git-settings.ts).
 */
export async function stageAll(dir: string, pathspec: readonly string[], options: { env?: Record<string, string>; writable?: readonly string[] } = {}) {
  const env = { ...gitEnvironment(process.env), ...pinnedGitEnvironment(dir), ...options.env };
  const operator = await readOperatorGitSettings(env);
  const confinedEnv = { ...withSettingsBefore(env, operator.settings), GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
  const gitDir = pinnedGitDir(dir);
  // A worktree's git directory is `<common>/worktrees/<name>`: its index, and the objects and config, are in the common one.
  const common = gitDir && path.dirname(path.dirname(gitDir));
  const writable = options.writable ?? [];
  const folders = common ? { readOnly: [dir], writable: [common, ...writable] } : { writable: [dir, ...writable] };
  const args = safeGitArgs(['add', '--all', '--', ...pathspec]);
  return runConfined('git', args, { ...folders, readOnlyIfPresent: operator.files }, (file, argv) => spawnGit(dir, file, argv, confinedEnv));
}

/** Starts `file` (git, or bubblewrap running git) in `cwd`; stopped when git waits to open a FIFO. */
async function spawnGit(cwd: string, file: string, args: string[], env: Record<string, string>, input?: string) {
  const child = execa(file, args, { cwd, reject: false, stripFinalNewline: true, env, extendEnv: false, ...(input === undefined ? {} : { input }) });
  // Stopped as every process is (SIGTERM, which git answers by removing its lock files, then SIGKILL), when it waits to
  // open a FIFO swapped in for a file of the worktree: it would wait for good (process/fifo-wait.ts). Confined, the git
  // below bubblewrap gets the SIGTERM itself: bubblewrap's end would kill it outright, its locks left behind.
  const watch = watchFifoWait(child.pid, (waiting) => (waiting === child.pid ? child.kill('SIGTERM') : stopWaiting(waiting)));
  const result = await child.finally(() => watch.stop());
  if (!watch.fired) return result;
  const why = `git was stopped: it waited to open a FIFO (named pipe) that a process running alongside put where a file of ${cwd} was; the worker never waits on one`;
  return Object.assign(result, { failed: true, stderr: result.stderr ? `${result.stderr}\n${why}` : why });
}

/** Sends SIGTERM to `pid`, gone or not. */
function stopWaiting(pid: number): void {
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    // Gone already.
  }
}

/** Upper bound of a worktree's `gitdir` record, a path. @unit bytes */
const MAX_GITDIR_RECORD_BYTES = 4_096;

/**
 * Pins the git directory of the worktree `dir` of `repo`: the one of `repo`'s worktree records (`<common dir>/worktrees/
 * <name>/gitdir`, outside any workspace) that names `dir`. Every later git in `dir` uses it, whatever `dir/.git` says.
 * @throws WORKSPACE_ERROR when no worktree of `repo` is at `dir` (its `.git` was replaced, or it belongs elsewhere)
 */
export async function pinWorktree(dir: string, repo: string, stageId: string): Promise<void> {
  const common = await git(repo, ['rev-parse', '--path-format=absolute', '--git-common-dir']);
  const records = common.failed ? '' : path.join(common.stdout, 'worktrees');
  const expected = path.join(await realpath(dir), '.git');
  for (const name of existsSync(records) ? await readdir(records) : []) {
    // A small regular file, checked on the handle: never a symlink, never a FIFO that would hold the read.
    const record = await readOwnFile(path.join(records, name, 'gitdir'), MAX_GITDIR_RECORD_BYTES);
    if (record?.toString('utf8').trim() === expected) {
      pinGitDir(dir, path.join(records, name));
      return;
    }
  }
  throw stageFailure({
    type: 'WORKSPACE_ERROR',
    stageId,
    message: `${dir} holds a .git, but no worktree of ${repo} is there (\`git -C ${shellWord(repo)} worktree list\` does not name it); the worker runs no git in it`,
    hint: `remove the folder ${dir} (or start the run with another id), and check what replaced its .git`,
    details: { repo, dir },
  });
}

/**
 * Makes `dir` a worktree of `options.repo` on `options.branch`, creating the branch from `base` if
 * needed. Idempotent: an existing worktree is reused, so every stage and retry of a run shares it.
 * @throws CONFIG_INVALID when the repository, branch name or base is unusable
 */
export async function ensureWorktree(dir: string, options: WorktreeOptions, stageId: string): Promise<void> {
  await withLock(dir, async () => {
    if (existsSync(path.join(dir, '.git'))) return pinWorktree(dir, options.repo, stageId);
    const fail = (message: string, stderr?: string) =>
      stageFailure({ type: 'CONFIG_INVALID', stageId, message, details: { repo: options.repo, branch: options.branch, stderr: stderr?.slice(-2_000) } });

    // With `reject: false`, execa returns its error object as the result; a spawn failure has `code` ENOENT.
    const probe = await git(options.repo, ['rev-parse', '--git-dir']);
    if (probe.failed) {
      const missing = (probe as { code?: string }).code === 'ENOENT' && existsSync(options.repo);
      throw fail(
        missing
          ? 'git is not installed on the worker, and `workspace.repo` needs it'
          : `workspace.repo ${options.repo} is not a git repository${existsSync(options.repo) ? '' : ' (the folder does not exist)'}`,
        probe.stderr,
      );
    }
    if ((await git(options.repo, ['check-ref-format', '--branch', options.branch])).failed) {
      throw fail(`"${options.branch}" is not a valid git branch name; fix workspace.branch`);
    }
    if (existsSync(dir) && (await readdir(dir)).length > 0) {
      throw fail(`the run folder ${dir} already exists and is not a git worktree; remove it or start the run with another id`);
    }
    await git(options.repo, ['worktree', 'prune']);
    const branchExists = !(await git(options.repo, ['rev-parse', '--verify', '--quiet', `refs/heads/${options.branch}`])).failed;
    const base = options.base ?? 'HEAD';
    if (!branchExists && (await git(options.repo, ['rev-parse', '--verify', '--quiet', '--end-of-options', `${base}^{commit}`])).failed) {
      throw fail(`workspace.base "${base}" is not a commit in ${options.repo}${base === 'HEAD' ? ' (the repository has no commits yet)' : ''}`);
    }
    const add = branchExists
      ? await git(options.repo, ['worktree', 'add', '--', dir, options.branch])
      : await git(options.repo, ['worktree', 'add', '-b', options.branch, '--', dir, base]);
    // Another worker may have created it between our check and our `add`.
    if (add.failed && !existsSync(path.join(dir, '.git'))) {
      throw stageFailure({
        type: 'WORKSPACE_ERROR',
        stageId,
        // git says what it prepared before why it stopped: its `fatal:` line is the reason.
        message: `git worktree add ${dir} (branch ${options.branch}) failed: ${add.stderr.split('\n').find((line) => line.startsWith('fatal:')) ?? add.stderr.split('\n')[0]}`,
        // One way in: a run started under the id of one that ended has a folder of its own; the earlier one's worktree stays.
        hint:
          `a branch checked out in another worktree cannot be used twice (an earlier run under the same id keeps its worktree on the branch: ` +
          `remove it with \`agent-pipeline prune --older-than 0s\`, or start with another id or workspace.branch); run \`git -C ${shellWord(options.repo)} worktree list\``,
        details: { repo: options.repo, branch: options.branch, stderr: add.stderr.slice(-2_000) },
      });
    }
    await pinWorktree(dir, options.repo, stageId);
  });
}

/**
 * What `git add` stages: the whole worktree but the worker's bookkeeping folder. That folder ignores itself, but the
 * agent can rewrite its `.gitignore`; the pathspec holds whatever it says, so nothing in it (a repository planted
 * there included, which the look for nested repositories skips) is ever staged.
 */
const STAGED_PATHS = ['--', '.', `:(top,exclude)${OLD_BOOKKEEPING_DIR}`];

/** How many file names a report of conflicting or uncommitted files carries: it lands in the run's state and history. */
const NAMED_FILES = 20;
/** The length each of those names is cut to (a path may be 4 KB). @unit characters */
const NAMED_FILE_CHARS = 200;

/** Files as a report names them: the first {@link NAMED_FILES}, each cut to {@link NAMED_FILE_CHARS}. */
export interface NamedFiles {
  files: string[];
  /** The names for a message, with how many more there were: `a.md, b.md and 31 more`. */
  text: string;
}

/** The names of `all` (git's order) as a report carries them. */
export function namedFiles(all: string[]): NamedFiles {
  const files = all.slice(0, NAMED_FILES).map((name) => (name.length > NAMED_FILE_CHARS ? `${name.slice(0, NAMED_FILE_CHARS - 1)}…` : name));
  const more = all.length - files.length;
  return { files, text: more > 0 ? `${files.join(', ')} and ${more} more` : files.join(', ') };
}

/** The files in conflict in `dir` after a merge or rebase stopped (git's unmerged paths), as a report names them. */
export async function unmergedFiles(dir: string): Promise<NamedFiles> {
  return namedFiles((await git(dir, ['diff', '--name-only', '--diff-filter=U'])).stdout.split('\n').filter(Boolean));
}

/**
 * The files of the worktree `dir` that {@link commitAll} would commit (changed, added or removed since its branch's
 * last commit), as a report names them; no file when it holds none.
 * @throws GitError with git's stderr when `git status` fails
 */
export async function uncommittedFiles(dir: string): Promise<NamedFiles> {
  const status = await git(dir, ['status', '--porcelain', '--untracked-files=all', ...STAGED_PATHS]);
  if (status.failed) throw new GitError(`git status failed in ${dir}: ${status.stderr || status.stdout}`, status.stderr || status.stdout);
  return namedFiles(status.stdout.split('\n').filter(Boolean).map((line) => line.slice(3)));
}

/**
 * Commits everything that changed in the worktree (our bookkeeping folder aside) with `message`. Returns the new
 * commit, or `undefined` when there was nothing to commit.
 * @throws NestedRepositoryError when the worktree holds a git repository the agent made: staging it would run its config
 * @throws GitError with git's stderr when staging or committing fails (a lock)
 */
export async function commitAll(dir: string, message: string): Promise<string | undefined> {
  return withLock(dir, async () => {
    const run = async (args: string[]) => {
      const result = await git(dir, args);
      if (result.failed) throw new GitError(`git ${args[0] === '-c' ? 'commit' : args[0]} failed: ${result.stderr || result.stdout}`, result.stderr || result.stdout);
      return result.stdout;
    };
    await refuseNestedRepositories(dir, "commit the stage's work");
    const staged = await stageAll(dir, STAGED_PATHS.slice(1));
    if (staged.failed) throw new GitError(`git add failed: ${staged.stderr || staged.stdout}`, staged.stderr || staged.stdout);
    if (!(await git(dir, ['diff', '--cached', '--quiet'])).failed) return undefined;
    const hasIdentity = !(await git(dir, ['config', 'user.email'])).failed;
    await run([...(hasIdentity ? [] : FALLBACK_IDENTITY), 'commit', '--quiet', '-m', message]);
    return run(['rev-parse', 'HEAD']);
  });
}
