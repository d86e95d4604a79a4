import { setTimeout as sleep } from 'node:timers/promises';
import { WorkflowFailedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { followRun, isTransient, type FollowOptions, type FollowOutcome } from './follow-run.js';
import { ActivityStageCache, readRun, type RunSnapshot } from './run-reader.js';
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
import { InvalidRequestError, NoWorkerError, RunFailedError, toLibraryError, typedErrors, type RunFailureKind } from './errors.js';
import { StageEventTracker, StageProgressTracker, type RunEvent } from './run-events.js';
import { HistoryWatch } from './history-watch.js';
import { readTranscript, type TranscriptEntry, type TranscriptOptions } from './run-transcript.js';
import { finalAnswerOf, type FinalAnswerOptions } from './final-answer.js';
import type { ClientStoreSettings } from './client-store.js';
import type { RunSigner } from '../trust/signer.js';

/** What `run.status()` returns: the run's state, where it came from, and what Temporal knows of the execution. */
export type RunStatusReport = RunSnapshot;

/** Options of {@link RunHandle.approve}. */
export interface ApproveOptions {
  /** The waiting stage; optional when only one stage waits. */
  stage?: string;
  /** Allow these tools (permission waits), or `'all'` for every tool the stage was denied. */
  allow?: string[] | 'all';
  /** Raise the pipeline budget to this amount (budget waits). @unit US dollars */
  budgetUsd?: number;
  /** Grant this many more review rounds (review-round waits). */
  rounds?: number;
  /** A note kept with the decision. */
  comment?: string;
  /**
   * For an agent waiting mid-turn: the digest of the request decided (`waitingFor.promptDigest` in `status`); refused
   * if the agent waits on another by then. Filled in from the run's current wait when the client signs and it is left out.
   */
  request?: string;
}

/** Options of {@link RunHandle.events}. */
export interface EventsOptions {
  /** Stops the iteration (the run goes on). */
  signal?: AbortSignal;
  /**
   * While an agent works, how often its last heartbeat is read for `stage_progress` events. Changes of the run's
   * state (a stage starts, ends, waits) arrive as they happen, whatever this is. @unit milliseconds @default 2000
   */
  intervalMs?: number;
  /** Yield `stage_progress` events (what the agent is doing while its stage runs). @default true */
  progress?: boolean;
}

/** How long a decision may wait for a worker to take it. @unit milliseconds */
const UPDATE_TIMEOUT_MS = 20_000;
/** How long a decision waits when the task queue's last poll is over half a minute old. @unit milliseconds */
const QUIET_WORKER_UPDATE_TIMEOUT_MS = 5_000;
/** Times a decision is sent again because the run continued as new while it was on its way. */
const MAX_HAND_OVER_RETRIES = 3;
/** Polls in a row that may fail on a lost connection before `events()` gives up (about a minute). */
const MAX_FAILED_POLLS = 30;
/** Between two reads of a working agent's heartbeat by `events()`. @unit milliseconds */
const PROGRESS_INTERVAL_MS = 2_000;
/** After a failed read, before the next. @unit milliseconds */
const RETRY_DELAY_MS = 2_000;

/** Temporal's closed statuses and how the library names them. */
const FAILURE_KIND: Record<string, RunFailureKind> = { FAILED: 'failed', CANCELLED: 'cancelled', TERMINATED: 'terminated', TIMED_OUT: 'timed_out' };
/** Run statuses that name how a run failed (a run the pipeline's timeout ended is `timed_out` though Temporal says FAILED). */
const FAILURE_KINDS: ReadonlySet<string> = new Set<RunFailureKind>(['failed', 'cancelled', 'terminated', 'timed_out']);

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

  /** A decision's arguments, signed for this run when the client has a signing key. */
  private signed<T extends object>(decision: string, args: T): T {
    return this.signer ? this.signer.signDecision(this.id, decision, args) : args;
  }

  /**
   * The request a decision is for: the one given, else, when the client signs, the digest of the mid-turn request the
   * targeted stage's agent waits on now (a signed decision on one must name it, so its signature covers which).
   */
  private async requestOf(stage: string | undefined, given: string | undefined): Promise<{ request?: string }> {
    if (given !== undefined || !this.signer) return given === undefined ? {} : { request: given };
    const { state } = await readRun(this.client, this.id);
    const asking = state.stages.filter((s) => (stage === undefined || s.id === stage) && (s.waitingFor?.kind === 'tool_request' || s.waitingFor?.kind === 'question'));
    const digest = asking.length === 1 ? asking[0].waitingFor?.promptDigest : undefined;
    return digest === undefined ? {} : { request: digest };
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
  async *events(options: EventsOptions = {}): AsyncGenerator<RunEvent, void, undefined> {
    const tracker = new StageEventTracker();
    const progress = new StageProgressTracker();
    const cache = new ActivityStageCache();
    const watch = new HistoryWatch(this.client, this.id);
    let failedPolls = 0;
    while (!options.signal?.aborted) {
      let snapshot: RunSnapshot | undefined;
      try {
        snapshot = await readRun(this.client, this.id, cache);
        failedPolls = 0;
      } catch (err) {
        // A follow can last days: ride out a server restart or a network blip instead of giving up at once.
        if (!isTransient(err) || ++failedPolls > MAX_FAILED_POLLS) throw toLibraryError(err, this.address);
      }
      if (snapshot) {
        yield* tracker.next(snapshot.state);
        if (options.progress !== false) yield* progress.next(snapshot.state, snapshot.live);
        if (snapshot.executionStatus !== 'RUNNING') {
          const state = snapshot.state;
          // The snapshot's state is reconciled with the execution (run-end.ts): its status is how the run ended.
          yield { type: 'run_ended', runId: state.runId, state, status: state.status };
          return;
        }
      }
      await this.untilChange(watch, snapshot, options);
    }
  }

  /** Waits for the run's next change after `snapshot` (bounded while an agent works, so its progress is read). */
  private async untilChange(watch: HistoryWatch, snapshot: RunSnapshot | undefined, options: EventsOptions): Promise<void> {
    const working = options.progress !== false && (snapshot?.live.size ?? 0) > 0;
    const maxMs = working ? (options.intervalMs ?? PROGRESS_INTERVAL_MS) : undefined;
    try {
      if (snapshot?.execution) return await watch.changeAfter(snapshot.execution, { maxMs, signal: options.signal });
    } catch {
      // The long-poll failed (a server restart, a lost connection): the next read tells whether that lasts.
    }
    await sleep(maxMs ?? RETRY_DELAY_MS, undefined, { signal: options.signal }).catch(() => undefined);
  }

  /**
   * A stage's agent transcripts (stream-json lines, as saved), read from the run's workspace: this host must see the
   * workers' workspaces folder. With `follow`, lines come as the agent writes them, until the stage ends: what
   * `agent-pipeline logs --follow` prints. @throws InvalidRequestError (`INVALID_REQUEST`, `TRANSCRIPT_NOT_FOUND`)
   */
  transcript(options: TranscriptOptions): AsyncGenerator<TranscriptEntry, void, undefined> {
    return readTranscript(this.client, this.id, options);
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
  async result(): Promise<RunState> {
    for (let failedPolls = 0; ; ) {
      try {
        const state = (await this.workflow.result()) as RunState;
        if (state.status !== 'completed') throw new RunFailedError(state.status === 'cancelled' ? 'cancelled' : 'failed', state);
        return state;
      } catch (err) {
        if (err instanceof WorkflowFailedError) {
          const { state, executionStatus } = await this.status();
          const kind = FAILURE_KINDS.has(state.status) ? (state.status as RunFailureKind) : (FAILURE_KIND[executionStatus] ?? 'failed');
          throw new RunFailedError(kind, state, { cause: err });
        }
        // The result is a long poll that may last days: a server restart must not end it.
        if (!isTransient(err) || ++failedPolls > MAX_FAILED_POLLS) throw toLibraryError(err, this.address);
        await sleep(2_000);
      }
    }
  }

  /**
   * Answers a stage's question; the agent continues with the answer. Resolves with the run's state after it. `request`:
   * as in {@link ApproveOptions.request}.
   */
  answer(text: string, options: { stage?: string; request?: string } = {}): Promise<RunState> {
    return this.decide(async (h) => {
      const args = { stage: options.stage, text, ...(await this.requestOf(options.stage, options.request)) };
      return h.executeUpdate(answerStageUpdate, { args: [this.signed(answerStageUpdate.name, args)] });
    });
  }

  /** Approves what a stage waits for: a gate, more budget, denied tools, more review rounds, an agent's request. */
  approve(options: ApproveOptions = {}): Promise<RunState> {
    const { stage, allow, budgetUsd, rounds, comment } = options;
    return this.decide(async (h) => {
      const allowTools = Array.isArray(allow) ? allow : undefined;
      const args = { stage, budgetUsd, rounds, comment, allowTools, allowAll: allow === 'all' ? true : undefined, ...(await this.requestOf(stage, options.request)) };
      return h.executeUpdate(approveStageUpdate, { args: [this.signed(approveStageUpdate.name, args)] });
    });
  }

  /**
   * Denies the tool call (or question) a stage's agent waits on mid-turn (`tool_request` and `question` waits, with
   * `onPermissionRequest: ask`): the same agent goes on without it and reads `message` as the call's result.
   * `request`: as in {@link ApproveOptions.request}.
   */
  deny(options: { stage?: string; message?: string; request?: string } = {}): Promise<RunState> {
    return this.decide(async (h) => {
      const args = { stage: options.stage, message: options.message, ...(await this.requestOf(options.stage, options.request)) };
      return h.executeUpdate(denyStageUpdate, { args: [this.signed(denyStageUpdate.name, args)] });
    });
  }

  /** Rejects what a stage waits for; the stage fails with `reason`. `request`: as in {@link ApproveOptions.request}. */
  reject(reason: string, options: { stage?: string; request?: string } = {}): Promise<RunState> {
    return this.decide(async (h) => {
      const args = { stage: options.stage, reason, ...(await this.requestOf(options.stage, options.request)) };
      return h.executeUpdate(rejectStageUpdate, { args: [this.signed(rejectStageUpdate.name, args)] });
    });
  }

  /** Runs a failed stage again (`onFailure: ask`); `stage` may be left out when one stage waits after a failure. */
  retry(options: { stage?: string; feedback?: string } = {}): Promise<RunState> {
    return this.decide(async (h) => h.executeUpdate(retryStageUpdate, { args: [this.signed(retryStageUpdate.name, { stage: options.stage ?? (await this.failedStage()), feedback: options.feedback })] }));
  }

  /** Skips a failed stage (`onFailure: ask`); its dependents still run. */
  skip(options: { stage?: string } = {}): Promise<RunState> {
    return this.decide(async (h) => h.executeUpdate(skipStageUpdate, { args: [this.signed(skipStageUpdate.name, { stage: options.stage ?? (await this.failedStage()) })] }));
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

  /**
   * Sends a decision as a workflow update. Checks first that the run is open and a worker polls its task queue: an
   * update nobody accepts is not kept. A worker that has not polled for half a minute gets a short deadline, so a
   * stopped one is told within seconds, never after a minute.
   */
  private decide(send: (handle: WorkflowHandle) => Promise<RunState>): Promise<RunState> {
    return typedErrors(async () => {
      for (let handOvers = 0; ; handOvers++) {
        // Without a run id the handle targets the run's latest execution, so a run that continued as new gets it.
        const handle = this.workflow;
        const description = await handle.describe();
        if (description.status.name !== 'RUNNING') {
          throw new InvalidRequestError('RUN_CLOSED', `[RUN_CLOSED] run ${this.id} has ended (${description.status.name.toLowerCase()}); nothing waits for a decision`);
        }
        const presence = await readWorkerPresence(this.client, description.taskQueue);
        if (presence.kind === 'none') throw noWorker(description.taskQueue, presence.sinceMs);
        const timeoutMs = presence.kind === 'live' ? UPDATE_TIMEOUT_MS : QUIET_WORKER_UPDATE_TIMEOUT_MS;
        try {
          return await this.client.connection.withDeadline(Date.now() + timeoutMs, () => send(handle));
        } catch (err) {
          // The run continued as new while the decision was on its way: the execution it reached closed (or, handing
          // over, had nothing waiting). The decision is sent again to the execution that carries the run on.
          if (handOvers < MAX_HAND_OVER_RETRIES && (await this.continuedSince(description.runId))) continue;
          // The run may have closed between the check and the update (which then finds no open execution): say so.
          const now = await handle.describe().catch(() => undefined);
          if (now && now.status.name !== 'RUNNING') {
            throw new InvalidRequestError('RUN_CLOSED', `[RUN_CLOSED] run ${this.id} ended (${now.status.name.toLowerCase()}) before the decision reached it`, { cause: err });
          }
          if (presence.kind === 'quiet' && toLibraryError(err) instanceof NoWorkerError) throw noWorker(description.taskQueue, presence.sinceMs, err);
          throw err;
        }
      }
    }, this.address);
  }

  /** True when the run's latest execution is no longer `runId` (it continued as new since). */
  private async continuedSince(runId: string): Promise<boolean> {
    const latest = await this.workflow.describe().catch(() => undefined);
    return latest !== undefined && latest.runId !== runId;
  }

  /** The one stage waiting after a failure. @throws InvalidRequestError `REQUEST_REJECTED` when none or several wait. */
  private async failedStage(): Promise<string> {
    const { state } = await readRun(this.client, this.id);
    const waiting = state.stages.filter((s) => s.waitingFor?.kind === 'failure').map((s) => s.id);
    if (waiting.length === 1) return waiting[0];
    throw new InvalidRequestError(
      'REQUEST_REJECTED',
      waiting.length === 0
        ? `[REQUEST_REJECTED] no stage of run ${this.id} waits after a failure`
        : `[REQUEST_REJECTED] stages ${waiting.join(', ')} of run ${this.id} wait after a failure; name one with { stage }`,
    );
  }
}

/** What `cancel()` found: whether a worker polls the run's task queue, so the run stops now rather than when one does. */
export interface CancelOutcome {
  /** False when no worker has polled lately: the cancel waits in the run's history until one starts. */
  workerPolling: boolean;
  taskQueue: string;
}

function noWorker(taskQueue: string, sinceMs: number | undefined, cause?: unknown): NoWorkerError {
  const last = sinceMs === undefined ? 'no worker polls' : `no worker has polled for ${Math.round(sinceMs / 1000)} s on`;
  return new NoWorkerError(`[NO_WORKER] ${last} task queue "${taskQueue}", so nobody can take the decision; start a worker (createPipelineWorker, or \`agent-pipeline worker\`) and try again`, { cause });
}
