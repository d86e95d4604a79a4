import { workerFolderOfRun } from '../../workspace/worker-folder.js';
import { realpath } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isInside } from '../../../files/inside.js';
import { pinnedGitEnvironment } from '../../workspace/git-safety.js';
import type { RunWorkspace } from '../../workspace/run-workspace.js';
import { SETTINGS_VARIABLE } from './agent-auth.js';
import { fileURLToPath } from 'node:url';
import { STORE_VARIABLE } from '../../../store/store-settings.js';
import { type Json, objectAt, stringsAt } from './settings-json.js';

/*
 * What an agent may read of the worker's host. Without limits Claude Code's Read tool (and Grep, Glob) reads any file
 * the worker's user can, and a sandboxed Bash reads every file the user can (the sandbox limits writes): a 0600 key in
 * the worker's home, another run's workspace, the worker's own bookkeeping. Two layers close that, both in the
 * attempt's settings file:
 *
 * - the file tools: `permissions.blockFileToolReadsOutsideWorkingDirectories` keeps them to the agent's working
 *   folders (its workspace and `addDirs`), and `Read(//path)` deny rules keep them out of what lies inside those
 *   folders (the run's bookkeeping, credentials) or elsewhere. A deny rule wins over everything, so none is written for
 *   a folder that holds a working folder (a home that holds the workspaces root): the block covers the rest of it.
 * - the sandbox around Bash: `sandbox.filesystem.denyRead` hides the same folders from its commands, and `allowRead`
 *   lets the working folders back through (the sandbox takes the nearest rule, so what is denied inside them stays so).
 *
 * Paths are given as written and, when different, as their real path: both tools compare paths as written.
 */

/** Where an attempt's agent works, which decides what it may read. */
export interface AgentReadScope {
  /** The agent's working folder: the run's workspace, a lent `workspace.dir` or a stage's own worktree. */
  workspaceDir: string;
  /** The stage's `addDirs` (absolute): working folders too. */
  addDirs: readonly string[];
  /** The worker's workspaces root: every other run's folder and the worker's reserved folder lie in it. */
  workspacesRoot: string;
  /** The run's CLAUDE_CONFIG_DIR, which may hold Claude Code's credentials. */
  claudeConfigDir: string;
  /** The stage's bookkeeping folder: its parent holds every stage's settings (the operator's among them) and transcripts. */
  stageDir: string;
  /**
   * For a git worktree, the repository's git directory (`<repo>/.git`): the agent's own `git status` reads it. The
   * pinned CLI lets a worktree's git data through by itself too; listing it keeps that from depending on the release.
   */
  gitCommonDir?: string;
}

/**
 * The read scope of an attempt of stage `stageId` in `workspace`. `workspacesRoot` is the worker's; without it (a
 * backend called outside a worker) it is the folder holding the worker's folder that holds the run's bookkeeping.
 */
export function readScopeOf(workspace: RunWorkspace, stageId: string, addDirs: readonly string[] | undefined, workspacesRoot?: string): AgentReadScope {
  // The worktree's git directory as the worker found it from the repository (`<repo>/.git/worktrees/<name>`), never
  // from the `.git` file in the agent's reach.
  const gitDir = pinnedGitEnvironment(workspace.dir).GIT_DIR;
  return {
    workspaceDir: workspace.dir,
    addDirs: addDirs ?? [],
    workspacesRoot: workspacesRoot ?? path.dirname(workerFolderOfRun(workspace.bookkeeping)),
    claudeConfigDir: workspace.claudeConfigDir,
    stageDir: workspace.stageDir(stageId),
    ...(gitDir ? { gitCommonDir: path.dirname(path.dirname(gitDir)) } : {}),
  };
}

/** Credentials kept in a home folder: ssh, cloud and registry logins, Claude Code's own, Temporal's profiles. */
const HOME_CREDENTIALS = [
  '.ssh', '.aws', '.config/gh', '.claude', '.claude.json', '.gnupg', '.netrc', '.git-credentials', '.docker', '.kube',
  '.config/gcloud', '.azure', '.npmrc', '.pypirc', '.config/temporalio',
];

/** Variables naming a file of credentials or keys. */
const CREDENTIAL_FILE_VARIABLES = ['AWS_SHARED_CREDENTIALS_FILE', 'AWS_CONFIG_FILE', 'GOOGLE_APPLICATION_CREDENTIALS', 'TEMPORAL_CONFIG_FILE', 'TEMPORAL_TLS_CLIENT_KEY_PATH'];
/** And any other variable named like one (`AGENT_PIPELINE_SIGNING_KEY_FILE`, `DB_PASSWORD_FILE`). */
const CREDENTIAL_FILE_NAME = /(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)_(FILE|PATH)$/;

/** The worker's home: the agent gets the same HOME, and everything in it is the worker's, not the run's. */
function homeOf(env: NodeJS.ProcessEnv): string {
  return path.resolve(env.HOME || os.homedir());
}

/** Files the worker's settings name that hold credentials or keys, the operator's settings file among them. */
function credentialFiles(env: NodeJS.ProcessEnv): string[] {
  const names = Object.keys(env).filter((name) => CREDENTIAL_FILE_VARIABLES.includes(name) || CREDENTIAL_FILE_NAME.test(name));
  const settings = env[SETTINGS_VARIABLE]?.trim();
  const files = names.map((name) => env[name]?.trim() ?? '');
  if (settings && !settings.startsWith('{')) files.push(settings);
  return files.filter(Boolean).map((file) => path.resolve(file));
}

function explicitStoreFolder(env: NodeJS.ProcessEnv): string[] {
  const value = env[STORE_VARIABLE]?.trim();
  if (!value?.startsWith('file:')) return [];
  try {
    return [fileURLToPath(value)];
  } catch {
    return [];
  }
}

/** The folders and files an agent must not read, as absolute paths (not yet their real paths). */
export function deniedReadPaths(env: NodeJS.ProcessEnv, scope: AgentReadScope): string[] {
  const home = homeOf(env);
  return [
    // A home of `/` (some containers) would deny the whole host; its credentials are still listed one by one.
    ...(home === path.parse(home).root ? [] : [home]),
    ...HOME_CREDENTIALS.map((name) => path.join(home, name)),
    ...credentialFiles(env),
    scope.workspacesRoot,
    // A `file://` store of the operator's choosing: every run's checkpoints and claimed payloads (the default one lies
    // in the workspaces root, denied above).
    ...explicitStoreFolder(env),
    path.join(scope.claudeConfigDir, '.credentials.json'),
    path.dirname(scope.stageDir),
  ];
}

/** The folders an agent works in, which it reads whatever holds them. */
export function workingReadPaths(scope: AgentReadScope): string[] {
  return [scope.workspaceDir, ...scope.addDirs, ...(scope.gitCommonDir ? [scope.gitCommonDir] : [])];
}

/** Each path, and its real path where that differs (symlinks followed), without repeats. */
async function withRealPaths(paths: string[]): Promise<string[]> {
  const real = await Promise.all(paths.map((p) => realpath(p).catch(() => p)));
  return [...new Set(paths.flatMap((p, i) => [p, real[i]!]))];
}

/** The paths an attempt's agent may not read, and the working folders it may, each in every spelling. */
export interface ReadLimits {
  denied: string[];
  working: string[];
  /**
   * The run's CLAUDE_CONFIG_DIR: Claude Code keeps the session's files there (a long tool output it tells the agent to
   * read, the auto-memory), which its file tools may read outside the working folders; no deny rule may cover them.
   */
  session: string[];
}

/** Works out an attempt's read limits from the worker's environment and the agent's folders. */
export async function readLimitsFor(env: NodeJS.ProcessEnv, scope: AgentReadScope): Promise<ReadLimits> {
  return {
    denied: await withRealPaths(deniedReadPaths(env, scope)),
    working: await withRealPaths(workingReadPaths(scope)),
    session: await withRealPaths([scope.claudeConfigDir]),
  };
}

/** A path as a permission rule reads it: `//` starts an absolute path, and glob characters are escaped. */
function readRules(file: string): string[] {
  const escaped = file.replace(/[\\*?[\]{}!]/g, '\\$&');
  return [`Read(/${escaped})`, `Read(/${escaped}/**)`];
}

/**
 * The settings with the read limits added to the operator's own rules: the file tools' in every case, the sandbox's
 * when the sandbox is on (`sandboxed`). Nothing the operator wrote is removed.
 */
export function applyReadLimits(settings: Json, limits: ReadLimits, sandboxed: boolean): Json {
  const permissions = objectAt(settings.permissions);
  const kept = [...limits.working, ...limits.session];
  const deny = limits.denied.filter((denied) => !kept.some((folder) => isInside(denied, folder))).flatMap(readRules);
  const limited: Json = {
    ...settings,
    permissions: { ...permissions, deny: [...new Set([...stringsAt(permissions.deny), ...deny])], blockFileToolReadsOutsideWorkingDirectories: true },
  };
  if (!sandboxed) return limited;
  const sandbox = objectAt(settings.sandbox);
  const filesystem = objectAt(sandbox.filesystem);
  const denyRead = [...new Set([...stringsAt(filesystem.denyRead), ...limits.denied])];
  const allowRead = [...new Set([...stringsAt(filesystem.allowRead), ...limits.working])];
  return { ...limited, sandbox: { ...sandbox, filesystem: { ...filesystem, denyRead, allowRead } } };
}
