import type { Client, WorkflowHandle } from '@temporalio/client';
import { followRun, type FollowOptions, type FollowOutcome } from './follow-run.js';
import { readRun } from './run-reader.js';
import { readWorkerPresence } from './worker-presence.js';
import type { ForkedFrom, RunState } from '../pipeline/run-state.js';
import { FORK_FORCED_MEMO_KEY, FORKED_FROM_MEMO_KEY } from '../contracts/run-fork.js';
import {
  answerStageUpdate,
  approveStageUpdate,
  denyStageUpdate,
  rejectStageUpdate,
  retryStageUpdate,
  skipStageUpdate,
} from '../contracts/messages.js';
import { InvalidRequestError } from './errors.js';
import { typedErrors } from './temporal-errors.js';
import { failedStageOf, requestOf, sendSignedUpdate, type DecisionTarget } from './run-decisions.js';
import type { ApproveOptions, CancelOutcome, EventsOptions, RunStatusReport } from './run-handle-options.js';
import type { RunEvent } from './run-events.js';
import { runEvents, runResult } from './run-waiting.js';
import { readTranscript, type TranscriptEntry, type TranscriptOptions } from './run-transcript.js';
import { finalAnswerOf, type FinalAnswerOptions } from './final-answer.js';
import type { ClientStoreSettings } from './client-store.js';
import type { RunSigner } from '../trust/signer.js';

/** One pipeline run: read it, follow it, answer it. Get one from `client.start()` or `client.getRun(id)`. */
export class RunHandle {
  constructor(
    private readonly client: Client,
    /** The run (workflow) id. */
    readonly id: string,
    /** True when `start` found a run with this id still running and returned it instead of starting another. */
    readonly alreadyRunning = false,
    private readonly address?: string,
    /** Signs each decision for this run (`PipelineClient.connect({ signingKey })`); unsigned without one. */
    private readonly signer?: RunSigner,
    /** The client's settings its object store is opened from (`finalAnswer`). @default `process.env` */
    private readonly storeSettings: Pick<ClientStoreSettings, 'env' | 'encryptionKey'> = {},
  ) {}

  /** Where this handle's decisions go (run-decisions.ts). */
  private get target(): DecisionTarget {
    return { client: this.client, id: this.id, address: this.address, signer: this.signer };
  }

  private get workflow(): WorkflowHandle {
    return this.client.workflow.getHandle(this.id);
  }

  /**
   * The run's state now: from the workflow when a worker answers, else from its result or event history, so it works
   * for finished runs and with no worker running. @throws RunNotFoundError
   */
  status(): Promise<RunStatusReport> {
    return typedErrors(() => readRun(this.client, this.id), this.address);
  }

  /**
   * Follows the run, calling `onSnapshot` with every fresh state until it ends (or `signal` aborts); rides out a
   * server restart. What `agent-pipeline watch` draws.
   */
  follow(options: FollowOptions): Promise<FollowOutcome> {
    return typedErrors(() => followRun(this.client, this.id, options), this.address);
  }

  /**
   * What happens in the run, as it happens: stage started, progress of its agent (latest text, tool call, tokens),
   * completed, failed, waiting for a person, skipped, then `run_ended`, after which the iteration ends. No fixed
   * poll: it waits on Temporal's history long-poll, which answers when the run's state changes, and reads a working
   * agent's heartbeat every `intervalMs`. For a run that already ended it yields its stages' final events and
   * `run_ended`. A lost connection is retried for about a minute; calling `events()` again resumes from the run's
   * current state.
   */
  events(options: EventsOptions = {}): AsyncGenerator<RunEvent, void, undefined> {
    return runEvents(this.client, this.id, this.address, options);
  }

  /**
   * A stage's agent transcripts (stream-json lines, as saved), read from the run's workspace: this host must see the
   * workers' workspaces folder. With `follow`, lines come as the agent writes them, until the stage ends: what
   * `agent-pipeline logs --follow` prints. @throws InvalidRequestError (`INVALID_REQUEST`, `TRANSCRIPT_NOT_FOUND`)
   */
  transcript(options: TranscriptOptions): AsyncGenerator<TranscriptEntry, void, undefined> {
    return readTranscript(this.client, this.id, options, this.storeSettings);
  }

  /**
   * A stage's whole final answer, without its report block (the run state's `answer` is cut at 16 KB): read, when it
   * was cut, from the object store of the client's own settings (`AGENT_PIPELINE_STORE`, as the workers have it), from
   * any host; without that setting, from the default store in the workers' workspaces folder, which this host must see.
   * @throws InvalidRequestError (`INVALID_REQUEST` for an unknown stage, `FINAL_ANSWER_NOT_FOUND`); ConfigError
   *   (`CONFIG_INVALID`) when the store cannot be read with the client's settings
   */
  finalAnswer(stage: string, options: FinalAnswerOptions = {}): Promise<string> {
    return typedErrors(async () => finalAnswerOf((await readRun(this.client, this.id)).state, stage, { ...this.storeSettings, ...options }), this.address);
  }

  /** Where the run was forked from (`fork`, `rerun`), from its memo; undefined for a run that is no fork. */
  forkedFrom(): Promise<ForkedFrom | undefined> {
    return typedErrors(async () => {
      const { memo } = await this.workflow.describe();
      const from = memo?.[FORKED_FROM_MEMO_KEY] as ForkedFrom | undefined;
      return from && { runId: from.runId, stage: from.stage, ...(memo?.[FORK_FORCED_MEMO_KEY] ? { forced: true } : {}) };
    }, this.address);
  }

  /**
   * Waits for the run to end. Resolves with the final state when it completed.
   * @throws RunFailedError (with `type` and the final `state`) when it failed, was cancelled, terminated or timed out.
   */
  result(): Promise<RunState> {
    return runResult(this.client, this.id, this.address, () => this.status());
  }

  /**
   * Answers a stage's question; the agent continues with the answer. Resolves with the run's state after it. `request`:
   * as in {@link ApproveOptions.request}.
   */
  answer(text: string, options: { stage?: string; request?: string } = {}): Promise<RunState> {
    return sendSignedUpdate(this.target, answerStageUpdate, async () => ({ stage: options.stage, text, ...(await this.pendingRequest(options)) }));
  }

  /** Approves what a stage waits for: a gate, more budget, denied tools, more review rounds, an agent's request. */
  approve(options: ApproveOptions = {}): Promise<RunState> {
    const { stage, allow, budgetUsd, rounds, comment } = options;
    const allowTools = Array.isArray(allow) ? allow : undefined;
    return sendSignedUpdate(this.target, approveStageUpdate, async () => ({
      stage,
      budgetUsd,
      rounds,
      comment,
      allowTools,
      allowAll: allow === 'all' ? true : undefined,
      ...(await this.pendingRequest(options)),
    }));
  }

  /**
   * Denies the tool call (or question) a stage's agent waits on mid-turn (`tool_request` and `question` waits, with
   * `onPermissionRequest: ask`): the same agent goes on without it and reads `message` as the call's result.
   * `request`: as in {@link ApproveOptions.request}.
   */
  deny(options: { stage?: string; message?: string; request?: string } = {}): Promise<RunState> {
    return sendSignedUpdate(this.target, denyStageUpdate, async () => ({ stage: options.stage, message: options.message, ...(await this.pendingRequest(options)) }));
  }

  /** Rejects what a stage waits for; the stage fails with `reason`. `request`: as in {@link ApproveOptions.request}. */
  reject(reason: string, options: { stage?: string; request?: string } = {}): Promise<RunState> {
    return sendSignedUpdate(this.target, rejectStageUpdate, async () => ({ stage: options.stage, reason, ...(await this.pendingRequest(options)) }));
  }

  /** Runs a failed stage again (`onFailure: ask`); `stage` may be left out when one stage waits after a failure. */
  retry(options: { stage?: string; feedback?: string } = {}): Promise<RunState> {
    return sendSignedUpdate(this.target, retryStageUpdate, async () => ({ stage: options.stage ?? (await failedStageOf(this.target)), feedback: options.feedback }));
  }

  /** Skips a failed stage (`onFailure: ask`); its dependents still run. */
  skip(options: { stage?: string } = {}): Promise<RunState> {
    return sendSignedUpdate(this.target, skipStageUpdate, async () => ({ stage: options.stage ?? (await failedStageOf(this.target)) }));
  }

  /** The request a decision on `options.stage` is for (run-decisions.ts, requestOf). */
  private pendingRequest(options: { stage?: string; request?: string }): Promise<{ request?: string }> {
    return requestOf(this.target, options.stage, options.request);
  }

  /**
   * Cancels the run: running agents are stopped, their work stays in the workspace. The request is kept in the run's
   * history at once; when no worker polls the run's task queue (`workerPolling: false`), the run stops only when a
   * worker next picks it up, and `result()` waits until then.
   * @throws InvalidRequestError `RUN_CLOSED`
   */
  cancel(): Promise<CancelOutcome> {
    return typedErrors(async () => {
      const { status, taskQueue } = await this.workflow.describe();
      if (status.name !== 'RUNNING') throw new InvalidRequestError('RUN_CLOSED', `[RUN_CLOSED] run ${this.id} has already ended (${status.name.toLowerCase()})`);
      await this.workflow.cancel();
      return { workerPolling: (await readWorkerPresence(this.client, taskQueue)).kind !== 'none', taskQueue };
    }, this.address);
  }
}
