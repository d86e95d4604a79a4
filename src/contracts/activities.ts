import type { LeaseKey } from '../pipeline/limits.js';
import type { RunInputProblem } from '../pipeline/run-input-problems.js';
import type { RunRef } from '../pipeline/run-state.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import type { StageResult } from '../pipeline/stage-result.js';
import type { TemplateStage } from '../pipeline/template.js';
import type { StageAttemptInput, WithheldValues } from './stage-attempt.js';
import type { DecisionVerdict, RunTrustVerdict } from './trust-types.js';
import type { RunOwnerClaim } from './run-owner.js';
import type { ForkTakeOver, RunForkRequest } from './run-fork.js';

/*
 * The worker's activities as the workflows call them: names, inputs and results. The workflows type their proxies
 * with `PipelineActivities` and `createActivities` (activities/index.ts) returns one, so a change to either side
 * breaks the compilation of the other, and neither imports the other (Temporal's shared-module pattern).
 */

/*
 * Inputs that extend RunRef name the run's folder and checkpoints: its id, and its first execution's run id in runs
 * started since runs had folders of their own (workflows/run-folders.ts).
 */

/** What the workflow sends when a run with `workspace.keep` has ended. */
export interface CloseWorkspaceInput extends RunRef {
  status: 'completed' | 'failed' | 'cancelled';
  keep: 'always' | 'onFailure' | 'never';
  /** The branch was pushed (`workspace.push`), so it stays when the worktree goes. */
  pushed: boolean;
}

export interface CloseWorkspaceResult {
  removed: boolean;
  warnings: string[];
}

/** What the workflow sends to deliver a run's branch. */
export interface DeliverRunInput extends RunRef {
  pipelineName: string;
  baseDir: string;
  /** The run's inputs; empty when `withheld.inputs`. */
  inputs: Record<string, string>;
  /** Completed stages, for the pull request's templates; empty when `withheld.stages` (they are read from the run). */
  priorStages: Record<string, TemplateStage>;
  /** What the workflow left out; the activity reads what the branch and pull request templates use from the run. */
  withheld?: WithheldValues;
  workspace: NonNullable<PipelineDefinition['workspace']>;
  /** Try `git pull --rebase` once when the push is rejected. */
  rebaseOnce: boolean;
}

/** How delivery ended. A rejection or conflict is an outcome the workflow decides about, not a failure. */
export interface DeliverRunResult {
  status: 'pushed' | 'rejected' | 'conflict';
  branch: string;
  remote: string;
  /** The worktree a person resolves a conflict in. */
  workspace: string;
  /** The pushed commit. */
  commit?: string;
  /** The branch was rebased onto the remote's before it was pushed. */
  rebased?: boolean;
  /** Why the push was refused (`rejected`, `conflict`). */
  message?: string;
  /** Files in conflict. */
  files?: string[];
  pullRequestUrl?: string;
  compareUrl?: string;
  warnings: string[];
}

/** What the workflow sends to merge a stage's branch again after a person resolved a conflict. */
export interface MergeStageInput extends RunRef {
  pipelineName: string;
  baseDir: string;
  inputs: Record<string, string>;
  workspace: NonNullable<PipelineDefinition['workspace']>;
  stageId: string;
}

/** What a run sends to take or give back the keys of its pipeline's `limits:`. */
export interface RunLeasesInput {
  /** The run's workflow id, which the wait is reported to. */
  runId: string;
  /** The run's holder id: the same in every execution of the run (its first execution's run id is in it). */
  holder: string;
  /** Rendered and sorted. */
  keys: LeaseKey[];
}

/** What a fork's run sends to prepare it; the pipeline, bundle and inputs are read from its own start input. */
export interface PrepareForkInput extends RunRef {
  /** The new run's workflow id. */
  runId: string;
  fork: RunForkRequest;
}

/** How merging a stage's branch into the run's went. */
export type MergeOutcome = { kind: 'merged'; commit: string } | { kind: 'conflict'; files: string[]; message: string };

/** Every activity a worker registers, by the name the workflows call it. */
export interface PipelineActivities {
  /** Checks a run's input before its first stage (a local activity): the problems, empty when there is none. */
  checkRunInput(input: unknown): Promise<RunInputProblem[]>;
  /** Whether this worker runs the run: its signature by a trusted key (a local activity). */
  checkRunTrust(input: unknown): Promise<RunTrustVerdict>;
  /** Whether a decision (an update's name and arguments) was signed for this run (a local activity). */
  verifyDecision(decision: string, args: unknown): Promise<DecisionVerdict>;
  /** Runs one attempt of one stage. */
  runStage(input: StageAttemptInput): Promise<StageResult>;
  /** Takes the run's pipeline `limits:` keys for its life; returns the keys held. */
  acquireRunLeases(input: RunLeasesInput): Promise<string[]>;
  /** Gives back the run's keys. */
  releaseRunLeases(input: { holder: string; keys: string[] }): Promise<void>;
  /** Of these workflow ids, those whose runs are closed (for the lease workflows). */
  closedRuns(workflowIds: string[]): Promise<string[]>;
  /** Pushes the run's branch and opens the pull request. */
  deliverRun(input: DeliverRunInput): Promise<DeliverRunResult>;
  /** Records that the run ended and removes its workspace when `keep` says so. */
  closeWorkspace(input: CloseWorkspaceInput): Promise<CloseWorkspaceResult>;
  /** Merges a stage's branch into the run's again after a person resolved a conflict. */
  mergeStage(input: MergeStageInput): Promise<MergeOutcome>;
  /** Makes the worker that runs it the owner of a run (on the run's shared queue): its own task queues. */
  claimRunOwner(input: RunRef): Promise<RunOwnerClaim>;
  /** Answers on an owner's ping queue: the owner is alive (its identity). */
  pingRunOwner(): Promise<string>;
  /**
   * A fork's first step: checks the fork against its source run, lays out its workspace from the source's checkpoint
   * and returns the stages it takes over. @throws FORK_REFUSED (not retried) naming the stage and the field
   */
  prepareFork(input: PrepareForkInput): Promise<ForkTakeOver>;
}
