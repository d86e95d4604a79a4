import type { ResolvedStage } from '../../pipeline/stage-options.js';
import type { TokenUsage } from '../../pipeline/stage-result.js';
import type { StagePrompt } from '../prompt.js';
import type { RunWorkspace } from '../workspace.js';

/** Progress a stage attempt reports with each heartbeat; what a retried attempt needs to resume. */
export interface AttemptProgress {
  sessionId?: string;
  turns: number;
  costUsd: number;
  /** Wall-clock time of the last agent event. @unit milliseconds since the epoch */
  lastEventAt: number;
}

/** One stage attempt, as a backend sees it. */
export interface BackendRequest {
  stage: ResolvedStage;
  prompt: StagePrompt;
  workspace: RunWorkspace;
  attempt: number;
  /** Session to continue, from the previous attempt's last heartbeat. */
  resumeSessionId?: string;
  /** Where to keep the raw transcript of this attempt. */
  transcriptPath: string;
  /** Aborted when Temporal cancels the activity (run cancelled, heartbeat timeout, worker shutdown). */
  signal: AbortSignal;
  heartbeat(progress: AttemptProgress): void;
}

/** What a backend returns when the agent finished its turn; failures are thrown from the catalogue. */
export interface BackendOutcome {
  /** The agent's final answer, where the output contract is read from. */
  text: string;
  sessionId?: string;
  usage: TokenUsage;
  costUsd: number | null;
  numTurns: number;
  durationMs: number;
  warnings: string[];
}
