import { log } from '@temporalio/activity';
import path from 'node:path';
import { keepHeartbeating } from './keep-heartbeating.js';
import type { StageAttemptInput } from '../../contracts/stage-attempt.js';
import { redactSecrets } from '../secrets.js';
import { repoOf } from '../workspace/open-workspace.js';
import type { RunWorkspace } from '../workspace/run-workspace.js';
import { applyWork } from './git-snapshot.js';
import type { CheckpointManifest } from './manifest.js';
import { restoreIfNeeded, type Restored } from './restore-checkpoint.js';
import type { CheckpointOptions } from './settings.js';
import { takeCheckpoint, type CheckpointTarget } from './take-checkpoint.js';
import { readRestoreRecord, writeRestoreRecord } from './marker.js';
import { sha256Hex } from './keys.js';
import { runPaths } from '../workspace/run-folder.js';
import { withSharedLock } from '../workspace/shared-lock.js';
import { openWorkerSubfolder } from '../workspace/worker-folder.js';

/*
 * Checkpoints around one stage attempt, all inside the stage activity (no workflow change): a restore before the
 * workspace is opened when this host lacks it (or holds an older copy), one when a stage first starts, one every
 * `checkpoint.every` while it runs, and one when the attempt ends, whatever its outcome. A run waits for a person
 * only after an attempt ended (a question, an approval after the stage, a failure with `onFailure: ask`) or before a
 * stage's first attempt (an approval gate), so the end-of-attempt checkpoint is also the one before every wait.
 */

/** What kind of workspace a run has, from its pipeline. */
export function workspaceKind(input: StageAttemptInput): CheckpointManifest['kind'] {
  const settings = input.pipeline.workspace;
  if (settings?.repo !== undefined) return 'git';
  return settings?.dir !== undefined ? 'none' : 'folder';
}

/** What an attempt is told of the restore of the run on this host: the checkpoint, and what the restore warned of. */
export interface AttemptRestore {
  id: string;
  takenAt: string;
  warnings: string[];
}

/** Where the attempt of {@link restoreForAttempt} is about to run. */
export interface AttemptRestorePlace {
  input: StageAttemptInput;
  workspacesRoot: string;
  /** With a git workspace: the run's branch, as this attempt renders it. */
  branch?: string;
  /** The stage's very first start (no earlier attempt, round or continuation): nothing of it to have been restored. */
  firstStart: boolean;
  /** Opens the run's workspace (not a stage's worktree), once the restore put it back. */
  open: () => Promise<RunWorkspace>;
  /** The attempt's cancellation: stops a wait for another attempt's restore. */
  signal?: AbortSignal;
}

/**
 * Restores the run before an attempt when this host lacks it (or holds an older copy), the worktree's uncommitted work
 * included, for one attempt of the run at a time among the worker processes that share this workspaces folder (one
 * process, or several on one volume). Parallel stages of a run whose host was lost move here at once: each restoring
 * on its own, the second found the folders the first had just moved into place (ENOTEMPTY) and failed its attempt,
 * spending a retry the loss of a host should not cost, or went on before the first had laid out the worktree's work.
 * Now the later ones wait (heartbeating, as all of an attempt's setup does) and find the run in place, and each stage
 * that moved is told of the restore all the same at its first attempt here (marker.ts), whether it came at once or
 * later.
 * @returns what to tell the attempt; undefined when there was nothing to restore, or this stage already ran here since
 */
export async function restoreForAttempt(options: CheckpointOptions | undefined, place: AttemptRestorePlace): Promise<AttemptRestore | undefined> {
  // A fork point holds no bookkeeping: nothing a run could go on from on another host.
  if (!options || options.forkPointsOnly) return undefined;
  const { input } = place;
  const runId = input.runId;
  // Not behind the run's checkpoints (a stage would wait for another's to start): a checkpoint writes this host's marker
  // before the store's index, so a check beside one never finds the copy here older than the store's newest.
  return withSharedLock(
    await restoreLockDir(place.workspacesRoot, runId),
    async () => {
      const restored = await restoreBeforeAttempt(options, place);
      if (restored) return restored;
      return joinRestore(runPaths(place.workspacesRoot, input).bookkeeping, input.stage.id, place.firstStart);
    },
    {
      signal: place.signal,
      onWait: (holder) => log.info('waiting for another attempt that is restoring the run or checking it needs no restore', { runId, holder }),
      onTakeOver: (holder) => log.warn('took over the restore lock of the run from an attempt that stopped keeping it (its worker was killed or froze)', { runId, holder }),
      onLost: () => log.warn('another attempt took over the restore lock of the run while this one held it (this worker froze longer than the lock keeps)', { runId }),
    },
  );
}

/**
 * The lock of the run's restore, in the workers' own folder of the workspaces root, where every worker process on that
 * folder sees it: named by the hash of the run id, which a path never holds.
 */
async function restoreLockDir(workspacesRoot: string, runId: string): Promise<string> {
  return path.join(await openWorkerSubfolder(workspacesRoot, 'locks'), `restore-${sha256Hex(runId)}`);
}

/** The restore itself, and the worktree's work laid out (which needs the worktree open). */
async function restoreBeforeAttempt(options: CheckpointOptions, place: AttemptRestorePlace): Promise<AttemptRestore | undefined> {
  const { input } = place;
  const kind = workspaceKind(input);
  const repo = kind === 'git' ? repoOf(input.baseDir, input.pipeline.workspace!) : undefined;
  const restored = await restoreIfNeeded(options, { runId: input.runId, firstExecutionRunId: input.firstExecutionRunId, workspacesRoot: place.workspacesRoot, kind, repo, branch: place.branch, stageId: input.stage.id });
  if (!restored) return undefined;
  const { id, takenAt } = restored.manifest;
  log.info('restored the run from its checkpoint', { runId: input.runId, checkpoint: id, takenAt });
  if (restored.manifest.git?.work) await finishRestore(restored, await place.open());
  return { id, takenAt, warnings: restored.warnings };
}

/**
 * A stage's first attempt on a copy of the run another stage's attempt restored: it is told of that restore, unless it
 * starts afresh; either way, recorded as having run here.
 */
async function joinRestore(bookkeeping: string, stageId: string, firstStart: boolean): Promise<AttemptRestore | undefined> {
  const record = await readRestoreRecord(bookkeeping);
  if (!record || record.stages.includes(stageId)) return undefined;
  await writeRestoreRecord(bookkeeping, { ...record, stages: [...record.stages, stageId] });
  return firstStart ? undefined : { id: record.id, takenAt: record.takenAt, warnings: [] };
}

/**
 * Once the worktree is open again: its files as the checkpoint had them. Then the restore record stops naming the work
 * (restore-checkpoint.ts): until it does, a later attempt lays it out again, as after a worker killed before this.
 */
export async function finishRestore(restored: Restored | undefined, workspace: RunWorkspace): Promise<void> {
  const work = restored?.manifest.git?.work;
  if (!work) return;
  await applyWork(workspace.parent?.dir ?? workspace.dir, work);
  const record = await readRestoreRecord(workspace.bookkeeping);
  if (record?.work !== undefined) await writeRestoreRecord(workspace.bookkeeping, { id: record.id, takenAt: record.takenAt, stages: record.stages });
}

/** The checkpoints of one attempt: {@link AttemptCheckpoints.start}, then {@link AttemptCheckpoints.end}. */
export class AttemptCheckpoints {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private running: Promise<unknown> = Promise.resolve();
  private readonly warnings: string[] = [];

  constructor(
    private readonly options: CheckpointOptions | undefined,
    private readonly target: CheckpointTarget,
    /** @unit milliseconds */
    private readonly everyMs: number,
    /** The attempt's latest heartbeat details, sent again while the end checkpoint runs. @default none: no heartbeat */
    private readonly details?: () => unknown,
  ) {}

  /**
   * Checkpoints the run at an attempt's first start (`first`), then every `everyMs` until {@link end}. That one runs
   * beside the agent's start, not before it, so a stage starts no later for it; but at a stage's very first start
   * (`stage` given) the returned promise waits for it: a fork from the stage starts from that checkpoint, which must
   * hold the workspace as the earlier stages left it, before this stage's agent changed anything.
   */
  async start(first: boolean, stage?: string): Promise<void> {
    if (!this.options) return;
    if (this.options.forkPointsOnly) {
      if (first && stage !== undefined) await this.take('start', stage);
      return;
    }
    const tick = () => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        this.running = this.take('periodic').finally(tick);
      }, this.everyMs);
      this.timer.unref();
    };
    if (!first) return tick();
    this.running = this.take('start', stage).finally(tick);
    if (stage === undefined) return;
    // Behind another stage's checkpoint, or of a large workspace on a loaded host, it may outlast the heartbeat timeout.
    const running = this.running;
    await this.heartbeating(() => running);
  }

  /**
   * Stops the periodic checkpoints and takes the last one; returns warnings of checkpoints that failed, and whether
   * the last one did: the caller of a completed attempt must not let the run go on from files no store holds.
   */
  async end(): Promise<{ warnings: string[]; endFailure?: string }> {
    if (!this.options || this.options.forkPointsOnly) return { warnings: this.warnings };
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    const endFailure = await this.heartbeating(() => this.take('end'));
    return { warnings: this.warnings, ...(endFailure === undefined ? {} : { endFailure }) };
  }

  /** `work`, heartbeating the attempt's latest details meanwhile (when there are details to send). */
  private heartbeating<T>(work: () => Promise<T>): Promise<T> {
    return this.details ? keepHeartbeating(this.details, work) : work();
  }

  /**
   * A checkpoint that fails leaves the run as durable as before it: the stage goes on, with a warning.
   * @returns the failure's message, or undefined when the checkpoint was written
   */
  private async take(reason: string, stage?: string): Promise<string | undefined> {
    try {
      await takeCheckpoint(this.options!, this.target, reason, stage);
      return undefined;
    } catch (err) {
      const message = redactSecrets(`the ${reason} checkpoint of the run failed: ${err instanceof Error ? err.message : String(err)}`);
      log.warn(message, { runId: this.target.runId });
      if (!this.warnings.includes(message)) this.warnings.push(message);
      return message;
    }
  }
}
