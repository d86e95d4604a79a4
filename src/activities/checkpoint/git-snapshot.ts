import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { copyRegularFile } from '../../files/regular-file.js';
import { ArchiveTooLargeError } from './folder-archive.js';
import { FALLBACK_IDENTITY, git, GitError, stageAll } from '../workspace/git.js';
import { findNestedRepositories } from '../workspace/nested-repositories.js';
import { OLD_BOOKKEEPING_DIR } from '../workspace/run-folder.js';
import { hiddenRefPrefix, listHiddenRefs } from '../workspace/checkpoint-refs.js';

/*
 * A git workspace's checkpoint: the work in progress as a commit built with a temporary index (the agent's own index
 * and the run's branch are never touched), named by a hidden ref, and shipped as a bundle of the branch and that
 * commit relative to the commit the worktree was created from. Every git runs through `git()` (git-safety.ts: no
 * hooks, no fsmonitor, config overrides, a scrubbed environment, the worktree's pinned git directory), and the one that
 * reads the worktree's files, `git add`, runs confined to the worktree (`stageAll`). Ignored files
 * are not carried (`git add` skips them), nor are repositories the agent made inside the worktree: staging one would
 * start a git inside it, which runs its config (docs/security.md), so they are excluded by pathspec.
 */

/** What {@link snapshotWorktree} recorded. */
export interface WorktreeSnapshot {
  tip: string;
  work: string;
  ref: string;
}

async function run(cwd: string, args: string[], env: Record<string, string> = {}, input?: string): Promise<string> {
  const result = await git(cwd, args, 'local', env, input);
  if (result.failed) throw new GitError(`git ${args.find((a) => !a.startsWith('-') && !a.includes('=')) ?? ''} failed while checkpointing: ${result.stderr || result.stdout}`, result.stderr || result.stdout);
  return result.stdout;
}

/**
 * Commits the worktree `dir` as it is (tracked, changed and untracked files; ignored files and nested repositories
 * left out) with a temporary index in `scratch`, names it by a hidden ref and writes the bundle `bundleFile`.
 */
export async function snapshotWorktree(dir: string, options: { branch: string; base: string; id: string; scratch: string; bundleFile: string; maxBytes: number }): Promise<WorktreeSnapshot> {
  const prefix = hiddenRefPrefix(path.basename(dir));
  // Independent looks side by side: each git started costs 5–10 ms on a busy host, a large share of a checkpoint.
  const [nested, head, older] = await Promise.all([
    findNestedRepositories(dir),
    run(dir, ['rev-parse', '--path-format=absolute', '--git-path', 'index', '--verify', 'HEAD^{commit}']),
    listHiddenRefs(dir, prefix),
  ]);
  // A folder it could not look into may hold a repository that `git add` would start a git in: carry nothing then.
  if (nested.truncated || nested.unreadable.length > 0) {
    throw new Error(`the worktree ${dir} could not be looked through whole for repositories the agent made (${nested.truncated ? 'too many files' : `unreadable: ${nested.unreadable.slice(0, 3).join(', ')}`}), so it was not checkpointed`);
  }
  const excluded = [OLD_BOOKKEEPING_DIR, ...nested.folders].map((folder) => `:(top,exclude,literal)${folder}`);
  // In a folder of its own: the confined git staging the worktree sees that folder, and nothing else of the scratch.
  const indexDir = path.join(options.scratch, 'index');
  await mkdir(indexDir);
  const index = path.join(indexDir, 'index');
  const [agentIndex, tip] = head.split('\n');
  // Starting from a copy of the agent's index keeps git from hashing every unchanged file again. Copied only as a
  // regular file checked on its handle (no symlink, no FIFO that would hold the copy); else git starts from none.
  await copyRegularFile(agentIndex, index).catch(() => rm(index, { force: true }));
  const env = { GIT_INDEX_FILE: index };
  const staged = await stageAll(dir, ['.', ...excluded], { env, writable: [indexDir] });
  if (staged.failed) throw new GitError(`git add failed while checkpointing: ${staged.stderr || staged.stdout}`, staged.stderr || staged.stdout);
  const tree = await run(dir, ['write-tree'], env);
  const work = await run(dir, [...FALLBACK_IDENTITY, 'commit-tree', tree, '-p', tip, '-m', `agent-pipeline checkpoint ${options.id}`]);
  await checkRestoredSize(dir, options.base, work, options.maxBytes);
  const ref = `${prefix}${options.id}`;
  // The new ref and the removal of the older ones in one transaction (their commits are in their bundles already).
  await run(dir, ['update-ref', '--stdin'], {}, [`update ${ref} ${work}`, ...older.map((name) => `delete ${name}`), ''].join('\n'));
  await run(dir, ['bundle', 'create', '--quiet', options.bundleFile, `refs/heads/${options.branch}`, ref, `^${options.base}`]);
  return { tip, work, ref };
}

/**
 * Refuses a snapshot whose files changed since `base` hold more than `maxBytes` once written out. Its bundle is
 * compressed: a sparse or repetitive file the agent made (100 GB of zeros is a bundle of about 100 MB) would pass the
 * cap on the bundle, then fill the disk of the host that restores it.
 * @throws ArchiveTooLargeError naming the size
 */
async function checkRestoredSize(dir: string, base: string, work: string, maxBytes: number): Promise<void> {
  const objects = await run(dir, ['rev-list', '--objects', '--no-object-names', work, `^${base}`]);
  if (objects === '') return;
  const described = await run(dir, ['cat-file', '--batch-check=%(objecttype) %(objectsize)'], {}, `${objects}\n`);
  let bytes = 0;
  for (const line of described.split('\n')) {
    const [type, size] = line.split(' ');
    if (type === 'blob') bytes += Number(size);
  }
  if (bytes > maxBytes) throw new ArchiveTooLargeError(`the files changed since its base commit hold ${bytes} bytes`);
}

/** Why a bundle cannot be used in `repo` (its base commit missing), or undefined when it can. */
export async function bundleProblem(repo: string, bundleFile: string): Promise<string | undefined> {
  const verified = await git(repo, ['bundle', 'verify', '--quiet', bundleFile]);
  return verified.failed ? (verified.stderr || verified.stdout).split('\n').slice(0, 3).join(' ') : undefined;
}

/**
 * Brings a checkpoint's commits into `repo`: the hidden ref, and the run's branch when the repository has none.
 * @returns a warning when the repository's branch differs from the checkpoint's (it is kept as it is)
 */
export async function unbundleInto(repo: string, bundleFile: string, snapshot: WorktreeSnapshot & { branch: string }): Promise<string | undefined> {
  await run(repo, ['bundle', 'unbundle', bundleFile]);
  await run(repo, ['update-ref', snapshot.ref, snapshot.work]);
  const branchRef = `refs/heads/${snapshot.branch}`;
  const current = await git(repo, ['rev-parse', '--verify', '--quiet', `${branchRef}^{commit}`]);
  if (current.failed) {
    // The empty old value makes this a create: never moves a branch someone made meanwhile.
    await run(repo, ['update-ref', branchRef, snapshot.tip, '']);
    return undefined;
  }
  if (current.stdout === snapshot.tip) return undefined;
  // Behind the checkpoint (this host's copy is older): moved forward, only from the commit it was seen at.
  if (!(await git(repo, ['merge-base', '--is-ancestor', current.stdout, snapshot.tip])).failed) {
    await run(repo, ['update-ref', branchRef, snapshot.tip, current.stdout]);
    return undefined;
  }
  return `the repository's branch ${snapshot.branch} is at ${current.stdout.slice(0, 12)}, not at ${snapshot.tip.slice(0, 12)} as when the checkpoint was taken; it was kept, and the checkpoint's files were put on top of it`;
}

/** Makes the worktree `dir`'s files those of `work`, its index the branch's: the checkpoint's changes uncommitted again. */
export async function applyWork(dir: string, work: string): Promise<void> {
  await run(dir, ['read-tree', '--reset', '-u', work]);
  await run(dir, ['reset', '--quiet']);
}
