import type { AgentQuestion } from './agent-prompt.js';
import type { ReviewLedger } from './review-ledger.js';
import type { StageResult } from './stage-result.js';

export type StageStatus = 'pending' | 'running' | 'waiting' | 'completed' | 'failed' | 'skipped' | 'cancelled';
/**
 * `blocked`: a stage waits for an answer to its agent's question (other waits for a person are `waiting`).
 * `timed_out`: the pipeline `timeout` or a stage's timeouts ended the run (Temporal records it as failed), or
 * Temporal's own execution timeout did.
 * `terminated`: someone terminated the run's workflow (`temporal workflow terminate`, `terminate()` of a Temporal
 * client); the workflow never sets it, the readers do (library/run-end.ts).
 */
export type RunStatus = 'running' | 'waiting' | 'blocked' | 'completed' | 'failed' | 'timed_out' | 'cancelled' | 'terminated';

/** Failure types that mean a timeout ended the run: the pipeline's, or a stage's (attempt, heartbeat, stall, approval). */
const TIMEOUT_FAILURES = new Set(['PIPELINE_TIMEOUT', 'ACTIVITY_START_TO_CLOSE', 'ACTIVITY_SCHEDULE_TO_CLOSE', 'ACTIVITY_HEARTBEAT', 'AGENT_STALLED', 'APPROVAL_TIMED_OUT']);

/** True when a run that failed with this failure type timed out. */
export function isTimeoutFailure(type: string): boolean {
  return TIMEOUT_FAILURES.has(type);
}

/** Why a run waits for a person, and what moves it on. */
export interface WaitingFor {
  /** `tool_request` and `question`: the agent asks mid-turn and its process waits (docs/permission-prompts.md). */
  kind: 'answer' | 'approval' | 'budget' | 'permission' | 'review_rounds' | 'failure' | 'tool_request' | 'question';
  /** What the person is asked, in a sentence. */
  message: string;
  /** The agent's question (`answer`). */
  question?: string;
  /** The tool call the agent waits to make (`tool_request`), its input summarised, and why the CLI asks. */
  request?: { tool: string; input: string; reason?: string };
  /** The agent's questions with the answers it suggests (`question`). */
  questions?: AgentQuestion[];
  /**
   * The digest of what the agent asks (`tool_request`, `question`): a decision may name it (`request`), and a signed
   * decision must, so that a signature given for one request can never decide another.
   */
  promptDigest?: string;
  /** Tool calls the CLI denied (`permission`). */
  denials?: { tool: string; input: unknown }[];
  /** The exact commands that move the run on, e.g. `agent-pipeline answer RUN --stage S "..."`. */
  commands: string[];
  /** @unit milliseconds since the epoch */
  since: number;
  /** When an unanswered wait times out (approval gates and questions with `timeout`). @unit milliseconds since the epoch */
  timeoutAt?: number;
  /** What happens at `timeoutAt`, in a few words (`the stage fails`). */
  onTimeout?: string;
}

/** A wait for a concurrency key (`limits:`): which key, and how many wait before this one. */
export interface LeaseWaitState {
  key: string;
  /** Waiters before this one (first come first served). */
  ahead: number;
  /** Holders of the key when last told, and its limit. */
  holders: number;
  limit: number;
  /** @unit milliseconds since the epoch */
  since: number;
}

/** One stage as the status query reports it. */
export interface StageState {
  id: string;
  /** A stage of the pipeline's `finally:` list, run once the run has ended. */
  finally?: boolean;
  status: StageStatus;
  backend: string;
  model: string;
  /** Attempts started in the current round, as the last result or failure reported them. */
  attempt?: number;
  /** Review round (1 for the first run of the stage; +1 per rework). */
  round?: number;
  startedAt?: number;
  /**
   * When the stage first started in this run, once it has started again (a review's rework, a retry a person asked
   * for): a fork from it starts from the workspace of then. Absent: `startedAt` is its first start.
   * @unit milliseconds since the epoch
   */
  firstStartedAt?: number;
  finishedAt?: number;
  result?: StageResult;
  /** Why the stage failed, when it did. */
  error?: { type: string; message: string };
  /** Set while the stage waits for a person. */
  waitingFor?: WaitingFor;
  /** Set while a running stage's attempt waits for a concurrency key (`limits:`) before its agent starts. */
  leaseWait?: LeaseWaitState;
  /** Why a skipped stage did not run, and whether its dependents still run (condition false, skipped by a person). */
  skip?: { reason: string; dependentsRun: boolean };
  /** A stage a fork took over from its source run: its cost there, carried, not spent by this run. @unit US dollars */
  carriedCostUsd?: number;
  /** Tokens and cost of every attempt of the stage, killed ones included. */
  totals?: { inputTokens: number; outputTokens: number; cacheReadTokens: number; cacheWriteTokens: number; costUsd: number; attempts: number; durationMs: number };
}

/** Where a run was forked from, as `status`, `list` and the run's memo show it. */
export interface ForkedFrom extends RunRef {
  runId: string;
  stage: string;
  /** Changed definitions of taken-over stages were taken over anyway (`--force`). */
  forced?: boolean;
}

/**
 * One run among those that bore a run id. Temporal lets a run id be used again once the run that had it ended; each run
 * under the id has a folder, bookkeeping and checkpoints of its own, named after the Temporal run id of its first
 * execution (the same in every execution of a run that continued as new).
 */
export interface RunRef {
  /** The run's id (its Temporal workflow id). */
  runId: string;
  /**
   * The Temporal run id of the run's first execution. Absent in runs started before runs had folders of their own:
   * their folder and checkpoints are named after the run id alone, as when they started.
   */
  firstExecutionRunId?: string;
}

/** The whole run as the status query reports it, and as the workflow returns it. */
export interface RunState extends RunRef {
  runId: string;
  pipeline: string;
  status: RunStatus;
  inputs: Record<string, string>;
  stages: StageState[];
  costUsd: number;
  budgetUsd?: number;
  /** Absolute path of the run's workspace on the worker, once a stage has reported it. */
  workspace?: string;
  warnings?: string[];
  /** Why the run failed, cancelled or timed out. */
  error?: { type: string; message: string };
  /** Set while the run waits for a key of the pipeline's `limits:` before its first stage starts. */
  leaseWait?: LeaseWaitState;
  /** The pipeline's `limits:` keys the run holds for its life. */
  leases?: string[];
  /** What the run delivered: the pushed `branch` and `commit`, the `pullRequestUrl` (or a `compareUrl` to open one). */
  outputs?: Record<string, string>;
  /** Each reviewer's findings across rounds, by reviewer stage id. */
  reviews?: Record<string, ReviewLedger>;
  /** A fork's source run and the stage it forked from. */
  forkedFrom?: ForkedFrom;
  /** The cost of the stages a fork took over, spent by its source run (not counted in `costUsd` nor the budget). @unit US dollars */
  carriedCostUsd?: number;
  startedAt: number;
  finishedAt?: number;
}
