import type { McpServer } from '../../pipeline/agent-access-schema.js';
import type { BackendName, BuiltinBackendName } from '../../pipeline/stage-options-schema.js';
import type { AgentActivity } from './agent-activity.js';
import type { ResolvedStage } from '../../pipeline/stage-options.js';
import type { StageResult, TokenUsage } from '../../pipeline/stage-result.js';
import type { StagePrompt } from '../prompt/compose.js';
import type { AskPerson } from './claude-cli/control-protocol.js';
import type { RunWorkspace } from '../workspace/run-workspace.js';
import type { ThrottledWait } from '../api-key/key-limiter.js';

/** Progress a stage attempt reports with each heartbeat; what a retried attempt needs to resume. */
export interface AttemptProgress {
  sessionId?: string;
  turns: number;
  costUsd: number;
  /** Wall-clock time of the last agent event. @unit milliseconds since the epoch */
  lastEventAt: number;
  /** Tokens so far, where the backend knows them while streaming (the API backend). */
  usage?: TokenUsage;
  /** What the attempt waits for before its next model call: the API key's pause or limits (`status` shows it). */
  throttled?: ThrottledWait;
  /** Warnings of the execution's earlier attempts, added by the stage runner so a retry still reports them. */
  warnings?: string[];
  /** What the agent is doing: its latest text and tool call, bounded and redacted (see `agent-activity.ts`). */
  agent?: AgentActivity;
}

/** A stage that becomes ready after this one, as the CLI backend pre-spawns its agent (warm start). */
export interface PrewarmTarget {
  /** The stage as its first attempt will see it (agent file defaults applied). */
  stage: ResolvedStage;
  /** Its system prompt (`--append-system-prompt-file`). */
  system: string;
  addDirs?: string[];
  /** @unit US dollars */
  maxBudgetUsd?: number;
}

/** One stage attempt, as a backend sees it. */
export interface BackendRequest {
  /** The run's id, for the commands a failure's hint names (`agent-pipeline logs RUN`). */
  runId: string;
  stage: ResolvedStage;
  prompt: StagePrompt;
  workspace: RunWorkspace;
  attempt: number;
  /** Session to continue, from the previous attempt's last heartbeat. */
  resumeSessionId?: string;
  /**
   * Continue an earlier session with this message instead of the task prompt: a person's answer,
   * granted tools, or reviewer feedback. The CLI resumes `sessionId`; the API backend replays the message.
   */
  continuation?: { kind: 'answer' | 'permission' | 'rework' | 'retry'; sessionId?: string; message: string };
  /** Spend cap of this attempt: the stage's cap, never more than what is left of the pipeline budget. @unit US dollars */
  maxBudgetUsd?: number;
  /** Pipeline-level MCP servers (the stage's own are in `stage.mcpServers` and win). */
  mcpServers?: Record<string, McpServer>;
  /** Absolute extra directories the agent may use (`--add-dir`). */
  addDirs?: string[];
  /**
   * For a backend that writes the answer to a file (the API backend): where, workspace-relative (the stage's
   * `output:`, rendered; `outputs/<stage>.md` when it sets none). Undefined for the others.
   */
  outputPath?: string;
  /** Where to keep the raw transcript of this attempt. */
  transcriptPath: string;
  /** Call before the agent writes a file (absolute or workspace-relative), so that a stage running alongside does not report it. */
  claimFile(file: string): void;
  /** Aborted when Temporal cancels the activity (run cancelled, heartbeat timeout, worker shutdown). */
  signal: AbortSignal;
  heartbeat(progress: AttemptProgress): void;
  /** The stages that become ready after this one, for a backend that starts their agents ahead of time. */
  prewarm?: () => Promise<PrewarmTarget[]>;
  /**
   * Asks a person, through the workflow, what the agent asks mid-turn (`onPermissionRequest: ask`); resolves to the
   * decision. Set for stages that ask; a backend that cannot pause its agent mid-turn ignores it.
   */
  askPerson?: AskPerson;
  /** Other stages start as soon as this one completes: a backend may then leave its agent's shutdown to the background. */
  stagesFollow?: boolean;
  /**
   * The id of the key that signed the run, as the worker verified it when the run started (workers with
   * `AGENT_PIPELINE_TRUSTED_KEYS`); absent for a run no worker verified. Set by the workflow, never by the run's input.
   */
  runSignedBy?: string;
  /**
   * This host lost the run's workspace and restored it (and the agent's sessions) from the checkpoint taken at
   * `takenAt` (ISO 8601) before this attempt: work done after that may be missing, and the agent is told so.
   */
  restoredFrom?: { id: string; takenAt: string };
}

/**
 * What a backend returns when the agent finished its turn (the stage result's accounting fields);
 * failures are thrown from the catalogue.
 */
export interface BackendOutcome
  extends Pick<StageResult, 'sessionId' | 'usage' | 'costUsd' | 'numTurns' | 'durationMs' | 'warnings' | 'permissionDenials' | 'warmStart'> {
  /** The agent's final answer, where the output contract is read from. */
  text: string;
}

/**
 * A backend: runs one attempt of one stage. Register it with the worker under the name a stage's `backend:`
 * selects; throw failures made by `stageFailure`, so they are classified like the built-in backends'.
 */
export type StageBackend = (request: BackendRequest) => Promise<BackendOutcome>;

/** What the stage prepares differently for a backend, so that the generic stage never tests a backend's name. */
export interface BackendTraits {
  /** Its agent cannot read files, so the prompt carries their content (within a size bound). */
  inlinesFiles: boolean;
  /** It writes the answer to the stage's `output:` file, so the request carries that path. */
  writesAnswerFile: boolean;
  /** Its agents may be started ahead of time (warm start), so the next stages are prepared for it. */
  prewarms: boolean;
}

const BUILT_IN_TRAITS: Record<BuiltinBackendName, BackendTraits> = {
  'claude-cli': { inlinesFiles: false, writesAnswerFile: false, prewarms: true },
  'anthropic-api': { inlinesFiles: true, writesAnswerFile: true, prewarms: false },
};

/** A backend registered with the worker reads files itself, writes what it wants and starts nothing early. */
const REGISTERED_TRAITS: BackendTraits = { inlinesFiles: false, writesAnswerFile: false, prewarms: false };

/** The traits of the backend a stage selects. */
export function backendTraits(name: BackendName): BackendTraits {
  return Object.hasOwn(BUILT_IN_TRAITS, name) ? BUILT_IN_TRAITS[name as BuiltinBackendName] : REGISTERED_TRAITS;
}

/**
 * How often a backend heartbeats while its agent is quiet (waiting on the model, running a long tool). Temporal
 * delivers a cancellation (the pipeline timeout, a failed sibling, `cancel`) only in the answer to a heartbeat, and
 * the worker sends at most one every 5 s (`maxHeartbeatThrottleInterval`), so beating at least that often lets a
 * cancellation reach the attempt within seconds, whatever the stage's `heartbeatTimeout`.
 * @unit milliseconds
 */
export function quietHeartbeatIntervalMs(stage: Pick<ResolvedStage, 'heartbeatTimeoutMs'>): number {
  return Math.max(1_000, Math.min(5_000, Math.floor(stage.heartbeatTimeoutMs / 4)));
}
