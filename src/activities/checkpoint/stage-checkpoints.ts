import { log } from '@temporalio/activity';
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

/** The restore an attempt needs before its workspace is opened; undefined when there is nothing to restore. */
export async function restoreBeforeAttempt(options: CheckpointOptions | undefined, input: StageAttemptInput, workspacesRoot: string, branch?: string): Promise<Restored | undefined> {
  // A fork point holds no bookkeeping: nothing a run could go on from on another host.
  if (!options || options.forkPointsOnly) return undefined;
  const kind = workspaceKind(input);
  const repo = kind === 'git' ? repoOf(input.baseDir, input.pipeline.workspace!) : undefined;
  const place = { runId: input.runId, workspacesRoot, kind, repo, branch, stageId: input.stage.id };
  const restored = await restoreIfNeeded(options, place);
  if (restored) log.info('restored the run from its checkpoint', { runId: input.runId, checkpoint: restored.manifest.id, takenAt: restored.manifest.takenAt });
  return restored;
}

/** Once the worktree is open again: its files as the checkpoint had them. */
export async function finishRestore(restored: Restored | undefined, workspace: RunWorkspace): Promise<void> {
  const work = restored?.manifest.git?.work;
  if (work) await applyWork(workspace.parent?.dir ?? workspace.dir, work);
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
