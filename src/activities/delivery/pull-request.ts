import { execa } from 'execa';
import { findExecutable } from '../process/find-executable.js';
import { git } from '../workspace/git.js';
import { gitEnvironment, pinnedGitEnvironment } from '../workspace/git-safety.js';
import { NestedRepositoryError, refuseNestedRepositories } from '../workspace/nested-repositories.js';

export interface PullRequestOptions {
  /** The run's worktree; `gh` reads the repository from it. */
  dir: string;
  remote: string;
  /** The pushed branch (the head of the pull request). */
  branch: string;
  title: string;
  body: string;
  /** The branch to merge into; `gh` picks the repository's default when absent. */
  base?: string;
  draft: boolean;
  /** The worker's environment (PATH to find `gh`, its `GH_TOKEN`); gh gets only what it needs of it. */
  env: NodeJS.ProcessEnv;
}

/** The pull request that was opened, or why not and where a person can open it. */
export interface PullRequestOutcome {
  url?: string;
  /** The hosting service's compare page for the branch, when the remote's URL is a known host. */
  compareUrl?: string;
  warnings: string[];
}

/** How long `gh` may take for one call. @unit milliseconds */
const GH_TIMEOUT_MS = 60_000;

/**
 * Opens a pull request for the pushed branch with `gh pr create` when `gh` is installed and authenticated.
 * Never throws: the branch is pushed either way, so anything that goes wrong here is a warning with the
 * compare URL a person can open instead.
 */
export async function openPullRequest(options: PullRequestOptions): Promise<PullRequestOutcome> {
  const compareUrl = compareUrlFor(await remoteUrl(options.dir, options.remote), options.branch, options.base);
  const fallback = (reason: string): PullRequestOutcome => ({
    compareUrl,
    warnings: [`no pull request was opened: ${reason}; ${compareUrl ? `open it at ${compareUrl}` : `open it by hand for branch ${options.branch} (the URL of remote ${options.remote} is not a GitHub, GitLab or Bitbucket address)`}`],
  });
  const gh = await findExecutable('gh', options.env);
  if (!gh) return fallback('`gh` is not installed on the worker');
  // gh runs its own `git status` in the worktree, which no option of ours reaches: not over a repository the agent made.
  const refused = await refuseNestedRepositories(options.dir, 'run `gh pr create`').catch((err: unknown) => {
    if (err instanceof NestedRepositoryError) return err;
    throw err;
  });
  if (refused) return fallback(`${refused.reason} (${refused.fix})`);
  const env = { ...ghEnvironment(options.env), ...pinnedGitEnvironment(options.dir) };
  const run = (args: string[]) => execa(gh, args, { cwd: options.dir, env, extendEnv: false, reject: false, timeout: GH_TIMEOUT_MS, stdin: 'ignore' });
  if ((await run(['auth', 'status'])).failed) return fallback('`gh` is not authenticated on the worker (run `gh auth login` or set GH_TOKEN)');
  // Values as `--flag=value`: a title or body from a template may start with `-`, and must never read as a flag.
  const args = ['pr', 'create', `--head=${options.branch}`, `--title=${options.title}`, `--body=${options.body}`];
  if (options.base) args.push(`--base=${options.base}`);
  if (options.draft) args.push('--draft');
  const created = await run(args);
  const url = created.stdout.split('\n').map((line) => line.trim()).reverse().find((line) => /^https?:\/\//.test(line));
  if (created.failed || !url) return fallback(`\`gh pr create\` failed: ${(created.stderr || created.stdout).split('\n')[0]?.slice(0, 300)}`);
  return { url, compareUrl, warnings: [] };
}

/**
 * `gh`'s whole environment: what a push gets (its token, proxy, certificates) and gh's own `GH_*` settings, nothing
 * else of the worker's. gh runs git in the workspace, and that git gets the same overrides (and pinned git directory)
 * as the worker's own.
 */
function ghEnvironment(env: NodeJS.ProcessEnv): Record<string, string> {
  const settings = Object.entries(env).filter((entry): entry is [string, string] => entry[0].startsWith('GH_') && entry[1] !== undefined);
  return { ...gitEnvironment(env, 'remote'), ...Object.fromEntries(settings), GH_PROMPT_DISABLED: '1' };
}

/** The remote's URL as configured, before `insteadOf` rewriting (which may point at a mirror). */
async function remoteUrl(dir: string, remote: string): Promise<string | undefined> {
  const result = await git(dir, ['config', '--get', `remote.${remote}.url`]);
  return result.failed ? undefined : result.stdout.trim();
}

/**
 * The web page that compares `branch` with `base` on GitHub, GitLab or Bitbucket, from a remote URL in any
 * of git's forms (`https://host/owner/repo.git`, `git@host:owner/repo.git`, `ssh://git@host/owner/repo`).
 */
export function compareUrlFor(url: string | undefined, branch: string, base?: string): string | undefined {
  if (!url) return undefined;
  const match = /^(?:https?:\/\/(?:[^@/]+@)?|ssh:\/\/(?:[^@/]+@)?|[^@/]+@)([^/:]+)(?::\d+)?[/:](.+?)(?:\.git)?\/?$/.exec(url);
  if (!match) return undefined;
  const [, host, repoPath] = match;
  const web = `https://${host}/${repoPath}`;
  const head = encodeURIComponent(branch).replace(/%2F/g, '/');
  if (host.includes('github')) return `${web}/compare/${base ? `${encodeURIComponent(base).replace(/%2F/g, '/')}...` : ''}${head}?expand=1`;
  if (host.includes('gitlab')) {
    return `${web}/-/merge_requests/new?merge_request%5Bsource_branch%5D=${encodeURIComponent(branch)}${base ? `&merge_request%5Btarget_branch%5D=${encodeURIComponent(base)}` : ''}`;
  }
  if (host.includes('bitbucket')) return `${web}/pull-requests/new?source=${encodeURIComponent(branch)}${base ? `&dest=${encodeURIComponent(base)}` : ''}`;
  return undefined;
}
