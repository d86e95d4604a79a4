import type { LeaseKey } from '../pipeline/limits.js';
import type { RunRef } from '../pipeline/run-state.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { ArtifactRef } from '../pipeline/stage-result.js';
import type { RunDeliveryOutcome, TemplateStage } from '../pipeline/template.js';
import type { StageExecution } from './run-owner.js';

/*
 * What the workflow sends for one stage attempt, and what the review loops remember of attempts between rounds.
 * Shared by the workflow (which builds the input) and the activity (which runs it), so neither imports the other.
 */

/** What an activity input left out of the template values; the activity reads them with `templateValuesQuery` when its templates use them. */
export interface WithheldValues {
  stages?: boolean;
  inputs?: boolean;
}

/** Reviewer feedback from an earlier round, as the workflow hands it over. */
export interface ReworkRound {
  round: number;
  reviewer: string;
  summary: string;
  feedback: unknown[];
}

/** What the workflow sends for one stage attempt; its run's folder and checkpoints are those `RunRef` names. */
export interface StageAttemptInput extends RunRef {
  pipelineName: string;
  baseDir: string;
  /** Set when the run carries its files: they are read from that bundle instead of `baseDir` (see run-bundle-files.ts). */
  bundleHash?: string;
  stage: ResolvedStage;
  /** The run's inputs; empty when `withheld.inputs` (they are read from the run). */
  inputs: Record<string, string>;
  /**
   * Earlier stages' results, as step templates and the prompt refer to them: every completed one in runs recorded
   * before template values went by reference, now those of the stages it `needs` (the others are read from the run).
   */
  priorStages: Record<string, TemplateStage>;
  /** What the workflow left out of `inputs` and `priorStages`; the attempt reads what its templates use from the run. */
  withheld?: WithheldValues;
  /** Pipeline-level settings every stage shares. */
  pipeline: Pick<PipelineDefinition, 'context' | 'systemPrompt' | 'mcpServers' | 'workspace' | 'promptsDir' | 'isolation'>;
  /** For `finally` stages: how the run ended (`{{run.status}}`, `{{run.error}}`, `{{run.delivery.…}}`). */
  runEnd?: { status: string; error: string; errorType?: string; delivery?: RunDeliveryOutcome };
  /** The run's inputs declared `type: object` (their values are JSON text): prompts show them as `key: value` lines. */
  objectInputs?: string[];
  /** Review round: 1 the first time, +1 for each rework. */
  round: number;
  /** Continue this stage's earlier session with a message: a person's answer, granted tools, rework feedback. */
  continuation?: { kind: 'answer' | 'permission' | 'rework' | 'retry'; sessionId?: string; message: string };
  /** Reviewer feedback from earlier rounds, oldest first. */
  reworkHistory?: ReworkRound[];
  /** What is left of the pipeline budget; the stage's own cap never exceeds it. @unit US dollars */
  budgetRemainingUsd?: number;
  /** Stages that become ready when this one completes, whose agents the worker may start ahead of time (warm start). */
  prewarm?: ResolvedStage[];
  /** The stage's `limits:` keys, rendered and sorted: the attempt holds them while it runs (activities/leases/). */
  leases?: LeaseKey[];
  /**
   * The id of the key that signed the run, from the trust verdict of its start (`RunTrustVerdict.signedBy`): a worker
   * with `AGENT_PIPELINE_SANDBOX=permissive` and trusted keys honours a stage's `sandbox: false` only with it. Absent in
   * runs no worker verified, and in runs recorded before the workflow sent it.
   */
  signedBy?: string;
  /**
   * For a stage with `onPermissionRequest: ask`: the token its attempts send with their mid-turn prompts, so the run
   * takes prompts only from the attempt it scheduled (a workflow-made uuid; secret only where history is encrypted).
   */
  promptToken?: string;
  /**
   * The stage execution this activity belongs to, in runs with one owner (`run-owner` patch): its attempt log's key,
   * and what a fallback on another worker carries over (attempts, session, cost, last failure). Absent in runs recorded
   * before, whose attempts are keyed by activity id.
   */
  execution?: StageExecution;
}


/** What the review loops remember between rounds, as a run carries it to its next execution (see RunCarryOver). */
export interface ReviewLoopState {
  extraRounds: [reviewer: string, rounds: number][];
  artifactsAtReview: [reviewer: string, [stage: string, ArtifactRef[]][]][];
  history: [stage: string, ReworkRound[]][];
  continuations: [stage: string, NonNullable<StageAttemptInput['continuation']>][];
}
