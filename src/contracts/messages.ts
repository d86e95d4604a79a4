import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { AgentPromptDecision, AgentPromptRequest } from '../pipeline/agent-prompt.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import type { RunBundle } from '../pipeline/run-bundle.js';
import type { RunState } from '../pipeline/run-state.js';
import type { RunForkRequest } from './run-fork.js';
import type { RunCarryOver } from './run-carry-over.js';
import type { TemplateStage } from '../pipeline/template.js';
import type { TrustSignature } from './trust-types.js';

/** Task queue used when `AGENT_PIPELINE_TASK_QUEUE` is not set; client and worker must agree. */
export const DEFAULT_TASK_QUEUE = 'agent-pipeline';

/** The workflow type name as it appears in the Web UI and in `list`. */
export const PIPELINE_WORKFLOW_TYPE = 'pipelineWorkflow';

/** What the client sends to start a run. Agent and prompt files come from `bundle`, or without one from `baseDir` on the worker. */
export interface PipelineRunInput {
  /** The input's shape (`RUN_INPUT_VERSION` in src/pipeline/run-input.ts, which checks it); absent means 1. */
  version?: number;
  pipeline: PipelineDefinition;
  /** Absolute folder of the pipeline file; agent, prompt and context paths resolve against it. */
  baseDir: string;
  /** The pipeline file as the user named it, for messages. */
  pipelineFile: string;
  inputs: Record<string, string>;
  /** Backends besides the built-in ones the run may name (see `runInputSchema`). */
  backends?: string[];
  /**
   * The pipeline file and every file it references, carried in the run (see `pipeline/run-bundle.ts`). Absent with
   * `start --files-from-worker` (and for runs started before bundles existed): workers then read `baseDir`.
   */
  bundle?: RunBundle;
  /**
   * The client's signature of this input, for this workflow id (AGENT_PIPELINE_SIGNING_KEY); workers with
   * AGENT_PIPELINE_TRUSTED_KEYS run only inputs signed by one of them (see docs/security.md).
   */
  signature?: TrustSignature;
  /**
   * Set by the run itself when it continues as new: the state its earlier execution handed over. Never sent by a
   * client; a fresh start that carries it is refused.
   */
  carryOver?: RunCarryOver;
  /** Set on a fork (`fork`, `rerun`): the source run and the stage; the worker reads the rest from the source. */
  fork?: RunForkRequest;
}

/** The run's full state: stages, attempts, costs, artifacts, what it waits for. */
export const getStatusQuery = defineQuery<RunState>('getStatus');

/** What a stage attempt asks of the template values its activity input left out. */
export interface TemplateValuesRequest {
  /** The stage that asks: it may read the stages it runs after (a `finally` stage or the delivery: any stage). */
  stage: string;
  /** Ids of the stages whose results its templates read. */
  stages?: string[];
  /** Whether it needs the run's inputs. */
  inputs?: boolean;
}
export interface TemplateValues {
  /** The requested stages that have a result the stage may read; a stage left out is unknown to its templates. */
  stages: Record<string, TemplateStage>;
  inputs?: Record<string, string>;
}

/**
 * The template values an activity input left out (see workflows/template-values.ts): a query, because it changes
 * nothing and is not recorded in the history, so the history holds each value once.
 */
export const templateValuesQuery = defineQuery<TemplateValues, [TemplateValuesRequest]>('templateValues');

/*
 * Human decisions are updates, not signals: the person gets an immediate, validated answer
 * ("stage review is not waiting for an answer") instead of a signal silently ignored.
 * `stage` may be omitted when exactly one stage waits.
 */

export interface AnswerStageInput {
  /**
   * For a stage whose agent waits mid-turn (`tool_request`, `question`): the request's digest (`promptDigest` of the
   * wait) this decision is for; refused when the agent now waits on another. Required when decisions are signed.
   */
  request?: string;
  /** The decision signed for this run (AGENT_PIPELINE_SIGNING_KEY), when the run accepts only signed decisions. */
  signature?: TrustSignature;
  stage?: string;
  text: string;
}
export interface ApproveStageInput {
  /**
   * For a stage whose agent waits mid-turn (`tool_request`, `question`): the request's digest (`promptDigest` of the
   * wait) this decision is for; refused when the agent now waits on another. Required when decisions are signed.
   */
  request?: string;
  /** The decision signed for this run (AGENT_PIPELINE_SIGNING_KEY), when the run accepts only signed decisions. */
  signature?: TrustSignature;
  stage?: string;
  /** Raise the pipeline budget to this amount (budget waits). @unit US dollars */
  budgetUsd?: number;
  /** Allow these tools and resume (permission waits). */
  allowTools?: string[];
  allowAll?: boolean;
  /** Grant this many more review rounds (review_rounds waits). */
  rounds?: number;
  comment?: string;
}
export interface RejectStageInput {
  /**
   * For a stage whose agent waits mid-turn (`tool_request`, `question`): the request's digest (`promptDigest` of the
   * wait) this decision is for; refused when the agent now waits on another. Required when decisions are signed.
   */
  request?: string;
  /** The decision signed for this run (AGENT_PIPELINE_SIGNING_KEY), when the run accepts only signed decisions. */
  signature?: TrustSignature;
  stage?: string;
  reason: string;
}
/** Denies what a stage's agent asks mid-turn (`tool_request` and `question` waits); the agent reads `message`. */
export interface DenyStageInput {
  /**
   * For a stage whose agent waits mid-turn (`tool_request`, `question`): the request's digest (`promptDigest` of the
   * wait) this decision is for; refused when the agent now waits on another. Required when decisions are signed.
   */
  request?: string;
  /** The decision signed for this run (AGENT_PIPELINE_SIGNING_KEY), when the run accepts only signed decisions. */
  signature?: TrustSignature;
  stage?: string;
  message?: string;
}
export interface RetryStageInput {
  /** The decision signed for this run (AGENT_PIPELINE_SIGNING_KEY), when the run accepts only signed decisions. */
  signature?: TrustSignature;
  stage: string;
  feedback?: string;
}
export interface SkipStageInput {
  /** The decision signed for this run (AGENT_PIPELINE_SIGNING_KEY), when the run accepts only signed decisions. */
  signature?: TrustSignature;
  stage: string;
}

/**
 * The failure `type` of every update a validator rejects (unknown stage, stage not waiting, wrong decision), so a
 * client can tell "you asked for something that does not apply" from a broken run; the message says what would work.
 */
export const UPDATE_REJECTED = 'UPDATE_REJECTED';

/** Answers a stage's question; the stage continues its session with the answer. */
export const answerStageUpdate = defineUpdate<RunState, [AnswerStageInput]>('answerStage');
/** Approves what a stage waits for: an approval gate, more budget, denied tools, more review rounds. */
export const approveStageUpdate = defineUpdate<RunState, [ApproveStageInput]>('approveStage');
/** Rejects what a stage waits for; the stage fails with the reason. */
export const rejectStageUpdate = defineUpdate<RunState, [RejectStageInput]>('rejectStage');
/** Runs a failed stage (waiting with `onFailure: ask`) again, optionally with feedback. */
export const retryStageUpdate = defineUpdate<RunState, [RetryStageInput]>('retryStage');
/** Skips a failed stage (waiting with `onFailure: ask`); its dependents run as if it had completed. */
export const skipStageUpdate = defineUpdate<RunState, [SkipStageInput]>('skipStage');
/** Denies the tool call (or question) a stage's agent waits on mid-turn; the agent goes on without it. */
export const denyStageUpdate = defineUpdate<RunState, [DenyStageInput]>('denyStage');
/**
 * Sent by a stage attempt, not by people: its agent asks mid-turn (`onPermissionRequest: ask`). The stage waits; the
 * update completes with the decision (a person's, or the deadline's), which the attempt passes to the waiting agent.
 * The attempt long-polls it from its own client, heartbeating meanwhile (docs/permission-prompts.md).
 */
export const agentPromptUpdate = defineUpdate<AgentPromptDecision, [AgentPromptRequest]>('agentPrompt');
