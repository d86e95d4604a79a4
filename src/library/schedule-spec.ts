import type { ScheduleDescription, ScheduleOptions, ScheduleSummary, ScheduleUpdateOptions } from '@temporalio/client';
import { RUN_INPUT_VERSION } from '../pipeline/run-input.js';
import { PIPELINE_WORKFLOW_TYPE, type PipelineRunInput } from '../contracts/messages.js';
import { PIPELINE_NAME_ATTRIBUTE } from '../contracts/search-attributes.js';
import { BUNDLE_MEMO_KEY, type RunBundleSummary } from '../pipeline/run-bundle.js';
import { runMemo, runSummary } from './runs.js';
import type { RunSigner } from '../trust/signer.js';
import type { ScheduleIdentity } from '../trust/signatures.js';

import { OVERLAP_POLICIES, type OverlapFlag } from './schedule-overlap.js';

export { OVERLAP_POLICIES, type OverlapFlag };

/** What the schedule's memo keeps about how it was made, so `schedule list` shows it as the person wrote it. */
export interface ScheduleMemo {
  pipeline: string;
  pipelineFile: string;
  /** `cron 0 9 * * MON-FRI` or `every 1h`. */
  spec: string;
  overlap: OverlapFlag;
  inputs: Record<string, string>;
}

export interface ScheduleCreateOptions {
  scheduleId: string;
  input: PipelineRunInput;
  taskQueue: string;
  cron?: string;
  /** An interval, as written (`2h`) and in milliseconds. */
  every?: { text: string; ms: number };
  overlap: OverlapFlag;
  note?: string;
  paused?: boolean;
}

/**
 * The action's input, signed for every run of this schedule (its id and creation time) when the client has a signing
 * key. The same signed input starts each run, so its expiry is the schedule's: see docs/security.md.
 */
function signedAction(input: PipelineRunInput, schedule: ScheduleIdentity, signer: RunSigner | undefined): PipelineRunInput {
  return signer ? signer.signSchedule(input, schedule) : input;
}

/**
 * The Temporal Schedule that starts `pipelineWorkflow` with the file's pipeline and inputs on each action. Its action
 * is unsigned: a signature names the schedule's creation time, which only the server knows (see `withRunInput`).
 */
export function buildSchedule(options: ScheduleCreateOptions): ScheduleOptions {
  const { input } = options;
  const memo: ScheduleMemo = {
    pipeline: input.pipeline.name,
    pipelineFile: input.pipelineFile,
    spec: options.cron ? `cron ${options.cron}` : `every ${options.every!.text}`,
    overlap: options.overlap,
    inputs: input.inputs,
  };
  return {
    scheduleId: options.scheduleId,
    spec: options.cron ? { cronExpressions: [options.cron] } : { intervals: [{ every: options.every!.ms }] },
    action: {
      type: 'startWorkflow',
      workflowType: PIPELINE_WORKFLOW_TYPE,
      taskQueue: options.taskQueue,
      args: [{ version: RUN_INPUT_VERSION, ...input }],
      // Temporal appends the scheduled time, so every run gets its own id: `<schedule id>-<time>`.
      workflowId: options.scheduleId,
      staticSummary: `${runSummary(input)} · schedule ${options.scheduleId}`,
      staticDetails: input.pipeline.description,
      typedSearchAttributes: [{ key: PIPELINE_NAME_ATTRIBUTE, value: input.pipeline.name }],
      // Each run's memo names the bundle it carries; `schedule describe` reads it here too.
      memo: runMemo(input),
    },
    policies: { overlap: OVERLAP_POLICIES[options.overlap] },
    state: { paused: options.paused, note: options.note },
    memo: { agentPipeline: memo },
    typedSearchAttributes: [{ key: PIPELINE_NAME_ATTRIBUTE, value: input.pipeline.name }],
  };
}

/**
 * The schedule as it was, starting runs of `input` from now on: the re-bundled files (`schedule update FILE`),
 * the same timing, policies and state (`paused` given: that pause state instead).
 */
export function withRunInput(previous: ScheduleDescription, input: PipelineRunInput, signer?: RunSigner, paused = previous.state.paused): ScheduleUpdateOptions {
  if (previous.action.type !== 'startWorkflow') throw new Error(`schedule ${previous.scheduleId} does not start workflows`);
  const schedule = { scheduleId: previous.scheduleId, createdAt: previous.info.createdAt.getTime() };
  return {
    ...previous,
    // Signed again (a fresh expiry), so `schedule update` is also how a schedule's signature is renewed.
    action: {
      ...previous.action,
      args: [signedAction(input, schedule, signer)],
      memo: runMemo(input) ?? {},
      staticSummary: `${runSummary(input)} · schedule ${previous.scheduleId}`,
      // The runs' pipeline name as of this file: it kept the name at create, so after a rename `list --pipeline`
      // found none of the new runs and `list` named the old pipeline.
      typedSearchAttributes: [{ key: PIPELINE_NAME_ATTRIBUTE, value: input.pipeline.name }],
    },
    state: { paused, note: previous.state.note, remainingActions: previous.state.remainingActions },
    // The schedule's own, which `schedule list` shows (its memo, from `create`, cannot be updated).
    typedSearchAttributes: [{ key: PIPELINE_NAME_ATTRIBUTE, value: input.pipeline.name }],
  };
}

/** The pipeline (name and file) the schedule's runs start with, from its action: the memo keeps the one of `create`. */
function actionPipeline(description: ScheduleDescription): { name?: string; file?: string } {
  const input = description.action.type === 'startWorkflow' ? (description.action.args?.[0] as PipelineRunInput | undefined) : undefined;
  return { name: input?.pipeline?.name, file: input?.pipelineFile };
}

/** The inputs the schedule's runs start with, from its action. */
function actionInputs(description: ScheduleDescription): Record<string, string> | undefined {
  return description.action.type === 'startWorkflow' ? (description.action.args?.[0] as PipelineRunInput | undefined)?.inputs : undefined;
}

/** The signature of the action the schedule's runs start with: its key and expiry, never the signature itself. */
function actionSignature(description: ScheduleDescription): { keyId: string; expiresAt: number } | null {
  const signature = description.action.type === 'startWorkflow' ? (description.action.args?.[0] as PipelineRunInput | undefined)?.signature : undefined;
  return signature ? { keyId: signature.keyId, expiresAt: signature.expiresAt } : null;
}

/** The bundle the schedule's runs carry, from its action's memo; null when they read files on the worker. */
export function scheduleBundle(description: ScheduleDescription): RunBundleSummary | null {
  const memo = description.action.type === 'startWorkflow' ? (description.action.memo as Record<string, unknown> | undefined) : undefined;
  return (memo?.[BUNDLE_MEMO_KEY] as RunBundleSummary | undefined) ?? null;
}

/** One schedule as `schedule list --json` and `schedule describe --json` print it. */
export interface ScheduleJson {
  scheduleId: string;
  pipeline: string | null;
  pipelineFile: string | null;
  spec: string | null;
  overlap: string | null;
  inputs: Record<string, string>;
  paused: boolean;
  note: string | null;
  /** The files each run carries, bundled at create or last `schedule update`; null when workers read them (`describe` only). */
  bundle?: RunBundleSummary | null;
  /**
   * Who signed the action its runs start with, and until when workers with trusted keys accept them (renew with
   * `schedule update`); null when unsigned (`describe` only). @unit expiresAt: milliseconds since the epoch
   */
  signature?: { keyId: string; expiresAt: number } | null;
  /** Next start times. @unit milliseconds since the epoch */
  nextRunAt: number[];
  /** Runs started so far, oldest first (Temporal keeps the most recent ten). */
  recentRuns: { runId: string; scheduledAt: number; startedAt: number }[];
}

/** True for schedules that start pipeline runs (the namespace may hold others). */
export function isPipelineSchedule(summary: Pick<ScheduleSummary, 'action'>): boolean {
  return summary.action?.workflowType === PIPELINE_WORKFLOW_TYPE;
}

export function scheduleJson(summary: ScheduleSummary | ScheduleDescription): ScheduleJson {
  const memo = summary.memo?.agentPipeline as ScheduleMemo | undefined;
  // Described, the action's own input: `schedule update` may have given another file, or the pipeline a new name.
  const action = 'raw' in summary ? actionPipeline(summary) : {};
  return {
    scheduleId: summary.scheduleId,
    pipeline: action.name ?? summary.typedSearchAttributes?.get(PIPELINE_NAME_ATTRIBUTE) ?? memo?.pipeline ?? null,
    pipelineFile: action.file ?? memo?.pipelineFile ?? null,
    spec: memo?.spec ?? null,
    overlap: memo?.overlap ?? null,
    // The action's own input when described: the memo keeps the inputs of `create`, and `schedule update` may change them.
    inputs: ('raw' in summary ? actionInputs(summary) : undefined) ?? memo?.inputs ?? {},
    paused: summary.state.paused,
    note: summary.state.note || null,
    ...('raw' in summary ? { bundle: scheduleBundle(summary), signature: actionSignature(summary) } : {}),
    nextRunAt: summary.info.nextActionTimes.map((d) => d.getTime()),
    recentRuns: summary.info.recentActions.map((a) => ({
      runId: a.action.workflow.workflowId,
      scheduledAt: a.scheduledAt.getTime(),
      startedAt: a.takenAt.getTime(),
    })),
  };
}
