import { CancellationScope, isCancellation, proxyActivities, type ActivityOptions } from '@temporalio/workflow';
import type { PipelineActivities } from '../contracts/activities.js';
import type { DeliverRunInput, DeliverRunResult } from '../contracts/activities.js';
import { onOwner, type RunOwner } from './run-owner.js';
import { DELIVERY_STAGE_ID } from '../pipeline/delivery-stage.js';
import type { PipelineRunInput } from '../contracts/messages.js';
import { shellWord } from '../pipeline/shell-words.js';
import type { RunTracker } from './run-tracker.js';
import { readStageFailure } from './stage-activity.js';
import { inlineTemplateValues } from './template-values.js';
import { commandsFor, type HumanWaits } from './waits.js';


/** Attempts of one delivery (push and pull request) before its failure reaches the run. */
const DELIVERY_MAXIMUM_ATTEMPTS = 3;

/** Git needs no model, so a delivery's attempts are short: a few minutes covers a slow remote. */
const DELIVERY_OPTIONS: ActivityOptions = {
  startToCloseTimeout: '10m',
  retry: { maximumAttempts: DELIVERY_MAXIMUM_ATTEMPTS, initialInterval: '5s', backoffCoefficient: 2 },
};
const deliveryActivities = proxyActivities<PipelineActivities>(DELIVERY_OPTIONS);

const CLOSING_OPTIONS: ActivityOptions = { startToCloseTimeout: '5m', retry: { maximumAttempts: 3, initialInterval: '2s' } };
const closingActivities = proxyActivities<PipelineActivities>(CLOSING_OPTIONS);

/**
 * The end of a run in a git workspace: push the run's branch (`workspace.push`), open the pull request, and remove
 * the worktree as `workspace.keep` says. Only pipelines that set these fields schedule anything here, so histories
 * of runs without them replay unchanged.
 */
export class RunDelivery {
  constructor(
    private readonly input: PipelineRunInput,
    private readonly tracker: RunTracker,
    private readonly waits: HumanWaits,
    /** Template values go by reference (see template-values.ts); false for runs recorded before. */
    private readonly byReference = false,
    /** The worker that holds the run's worktree; absent in runs recorded before owners. */
    private readonly owner?: RunOwner,
  ) {
    // Marked as an end-of-run step like `finally` stages, so it is not skipped as "never started" before it runs.
    // A continued run's carried state already holds it.
    if (input.pipeline.workspace?.push && !tracker.hasStage(DELIVERY_STAGE_ID)) {
      tracker.state.stages.push({ id: DELIVERY_STAGE_ID, status: 'pending', backend: 'git', model: input.pipeline.workspace.push.remote ?? 'origin', finally: true });
    }
  }

  /** Whether the pipeline asks for anything at the end of the run (push, or removing the workspace). */
  get active(): boolean {
    const workspace = this.input.pipeline.workspace;
    return workspace?.push !== undefined || (workspace?.keep !== undefined && workspace.keep !== 'always');
  }

  /**
   * Pushes the run's branch once every stage has completed. A rejected push is rebased once (`rebase-once`,
   * `ask`); what still conflicts fails the run, or with `ask` waits for a person: `retry` (after resolving it in
   * the worktree), `skip` (end without pushing) or `cancel`.
   * @returns the failure that ends the run, if any
   */
  async push(runFailed: boolean): Promise<{ type: string; message: string } | undefined> {
    const settings = this.input.pipeline.workspace;
    const push = settings?.push;
    if (!settings || !push) return undefined;
    if (runFailed) {
      this.tracker.markSkipped(DELIVERY_STAGE_ID, 'the run did not complete, so its branch was not pushed', false);
      return undefined;
    }
    const mode = push.onConflict ?? 'rebase-once';
    for (let round = 1; ; round++) {
      this.tracker.markRunning(DELIVERY_STAGE_ID, round);
      let result: DeliverRunResult;
      try {
        result = await this.deliverRun({
          ...this.tracker.ref(),
          pipelineName: this.input.pipeline.name,
          baseDir: this.input.baseDir,
          // By reference, like a stage's (see template-values.ts): the pull request's templates may read any stage.
          ...(this.byReference
            ? inlineTemplateValues(this.tracker, this.input.inputs, [])
            : { inputs: this.input.inputs, priorStages: this.tracker.templateStages() }),
          workspace: settings,
          rebaseOnce: mode !== 'fail',
        });
      } catch (err) {
        if (isCancellation(err)) throw err;
        const failure = readStageFailure(err, { id: DELIVERY_STAGE_ID, retries: DELIVERY_MAXIMUM_ATTEMPTS - 1 });
        this.tracker.markFailed(DELIVERY_STAGE_ID, failure);
        return failure;
      }
      for (const warning of result.warnings) this.tracker.warn(warning);
      if (result.status === 'pushed') {
        this.tracker.state.workspace ??= result.workspace;
        this.tracker.state.outputs = {
          ...this.tracker.state.outputs,
          branch: result.branch,
          ...(result.commit ? { commit: result.commit } : {}),
          ...(result.pullRequestUrl ? { pullRequestUrl: result.pullRequestUrl } : {}),
          ...(result.compareUrl ? { compareUrl: result.compareUrl } : {}),
        };
        this.tracker.markCompleted(DELIVERY_STAGE_ID, undefined);
        return undefined;
      }
      const type = result.status === 'conflict' ? 'PUSH_CONFLICT' : 'PUSH_REJECTED';
      const failure = { type, message: `[${type}] ${result.message ?? 'the push was rejected'}` };
      if (mode !== 'ask') {
        this.tracker.markFailed(DELIVERY_STAGE_ID, failure);
        return failure;
      }
      const runId = this.tracker.state.runId;
      const decision = await this.waits.waitFor(
        DELIVERY_STAGE_ID,
        {
          kind: 'failure',
          message:
            `${result.message}. Resolve it in ${result.workspace} (git pull --rebase ${shellWord(result.remote)} ${shellWord(result.branch)}, fix, commit) ` +
            'and retry the push, or skip it to end the run without pushing',
          commands: commandsFor('failure', runId, DELIVERY_STAGE_ID),
        },
        { noFeedback: 'waits on a rejected push: a retry pushes again, with no agent' },
      );
      if (decision.kind === 'skip') {
        this.tracker.markSkipped(DELIVERY_STAGE_ID, 'a person skipped the push after a conflict', true);
        this.tracker.warn(`the branch ${result.branch} was not pushed: a person skipped the push after a conflict`);
        return undefined;
      }
      if (decision.kind !== 'retry') {
        const rejected = { type: 'REJECTED', message: `[REJECTED] a person rejected the push: ${'reason' in decision ? decision.reason : decision.kind}` };
        this.tracker.markFailed(DELIVERY_STAGE_ID, rejected);
        return rejected;
      }
    }
  }

  /** Records the end of the run and removes its workspace as `workspace.keep` says; also for a cancelled run. */
  async close(status: 'completed' | 'failed' | 'cancelled'): Promise<void> {
    const keep = this.input.pipeline.workspace?.keep;
    if (keep === undefined || keep === 'always') return;
    const pushed = this.tracker.state.outputs?.commit !== undefined;
    try {
      const closed = await CancellationScope.nonCancellable(() =>
        this.owner
          ? this.owner.run('closing the workspace', (claim) => proxyActivities<PipelineActivities>(onOwner(claim, CLOSING_OPTIONS)).closeWorkspace({ ...this.tracker.ref(), status, keep, pushed }))
          : closingActivities.closeWorkspace({ ...this.tracker.ref(), status, keep, pushed }),
      );
      for (const warning of closed.warnings) this.tracker.warn(warning);
    } catch (err) {
      // Cleaning up never changes how the run ended; `agent-pipeline prune` removes what is left.
      this.tracker.warn(`the run's workspace could not be removed: ${(err as Error).message}`);
    }
  }

  /** The push runs where the run's worktree is: on its owner, or on the shared queue in runs recorded before owners. */
  private deliverRun(input: DeliverRunInput): Promise<DeliverRunResult> {
    const { owner } = this;
    if (!owner) return deliveryActivities.deliverRun(input);
    return owner.run('the delivery', (claim) => proxyActivities<PipelineActivities>(onOwner(claim, DELIVERY_OPTIONS)).deliverRun(input));
  }
}
