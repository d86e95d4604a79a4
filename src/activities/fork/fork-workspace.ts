import { existsSync } from 'node:fs';
import path from 'node:path';
import type { PipelineRunInput } from '../../contracts/messages.js';
import type { RunRef } from '../../pipeline/run-state.js';
import type { ObjectStore } from '../../store/object-store.js';
import { applyWork, bundleProblem, unbundleInto } from '../checkpoint/git-snapshot.js';
import type { CheckpointManifest } from '../checkpoint/manifest.js';
import { CHECKPOINT_OBJECTS } from '../checkpoint/manifest.js';
import { downloadVerified, unpackInto, workspaceObjects } from '../checkpoint/read-checkpoint.js';
import { withScratch } from '../checkpoint/scratch.js';
import { git } from '../workspace/git.js';
import { openPipelineWorkspace, repoOf, runBranch } from '../workspace/open-workspace.js';
import { runPaths } from '../workspace/run-folder.js';
import { writeFileAtomic, type RunWorkspace } from '../workspace/run-workspace.js';
import type { AllowedPaths } from '../workspace/allowed-paths.js';
import { forkRefused } from './fork-refused.js';

/*
 * A fork's workspace, laid out from the source run's checkpoint of the stage's first start: for a git workspace the
 * fork's own branch at the source branch's tip as it was then, with that checkpoint's uncommitted changes applied
 * uncommitted (the hidden checkpoint commit is never on a branch, so it is never pushed); for a run folder, a copy of
 * its files then. Every object is checked against the manifest first, as a restore does.
 */

/** Who lays the workspace out, in failure messages. */
const FORK_STAGE = '(fork)';
/** In the fork's bookkeeping once its workspace is laid out whole. */
const FORK_RECORD = 'fork.json';

/** Where the fork runs: its id, its start input, and the worker's folders. */
export interface ForkPlace extends RunRef {
  input: PipelineRunInput;
  workspacesRoot: string;
  allowedPaths: AllowedPaths;
}

/**
 * Lays the fork's workspace out from `manifest` (a checkpoint of run `source`), once: a workspace already there
 * (the activity retried after it) is kept.
 * @throws FORK_REFUSED when the fork's workspace is of another kind or repository than the source's
 */
export async function layOutForkWorkspace(store: ObjectStore, source: RunRef, manifest: CheckpointManifest, place: ForkPlace): Promise<RunWorkspace> {
  const sourceRunId = source.runId;
  const settings = place.input.pipeline.workspace;
  const kind = settings?.repo !== undefined ? 'git' : 'folder';
  const repo = settings?.repo !== undefined ? repoOf(place.input.baseDir, settings) : undefined;
  if (kind !== manifest.kind || (manifest.git && manifest.git.repo !== repo)) {
    const theirs = manifest.git ? `a worktree of ${manifest.git.repo}` : 'a run folder';
    const ours = repo ? `a worktree of ${repo}` : 'a run folder';
    throw forkRefused(`run ${sourceRunId} worked in ${theirs}, and the fork's pipeline asks for ${ours} (workspace.repo)`, 'fork with the workspace settings the source run had');
  }
  const paths = runPaths(place.workspacesRoot, place);
  const context = { inputs: place.input.inputs, stages: {}, run: { id: place.runId, pipeline: place.input.pipeline.name }, attempt: 1 };
  const open = () => openPipelineWorkspace({ root: place.workspacesRoot, runId: place.runId, firstExecutionRunId: place.firstExecutionRunId, baseDir: place.input.baseDir, settings, context, stageId: FORK_STAGE, allowedPaths: place.allowedPaths });
  // Laid out whole by an earlier try of the activity: kept as it is.
  if (existsSync(path.join(paths.bookkeeping, FORK_RECORD))) return open();
  const workspace = await withScratch(place.workspacesRoot, async (scratch) => {
    const files = await downloadVerified({ store }, { runId: source.runId, firstExecutionRunId: source.firstExecutionRunId, stageId: manifest.stage ?? FORK_STAGE }, manifest, scratch, workspaceObjects(manifest));
    if (manifest.kind === 'folder') {
      if (!existsSync(paths.dir)) await unpackInto(files[CHECKPOINT_OBJECTS.folderArchive], scratch, paths.dir);
      return open();
    }
    const bundle = files[CHECKPOINT_OBJECTS.gitBundle]!;
    const problem = await bundleProblem(repo!, bundle);
    if (problem) throw forkRefused(`the checkpoint of run ${sourceRunId} cannot be used in ${repo}: ${problem}`, `the repository needs the commit ${manifest.git!.base} the source run started from: fetch it into ${repo}, then fork again`);
    // The fork's own branch (rendered from its run id), created at the source branch's tip then: never the source's.
    const branch = runBranch(settings!, context, FORK_STAGE);
    const moved = await unbundleInto(repo!, bundle, { ...manifest.git!, branch });
    if (moved) throw forkRefused(`the fork's branch ${branch} exists already in ${repo}`, 'fork with another --id, or delete that branch');
    const opened = await open();
    await applyWork(opened.dir, manifest.git!.work);
    // The hidden checkpoint commit served its purpose; no ref keeps it in the repository.
    await git(repo!, ['update-ref', '-d', manifest.git!.ref]);
    return opened;
  });
  await writeFileAtomic(path.join(paths.bookkeeping, FORK_RECORD), `${JSON.stringify({ source: sourceRunId, checkpoint: manifest.id, stage: manifest.stage })}\n`);
  return workspace;
}
