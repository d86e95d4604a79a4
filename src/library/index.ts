// `agent-pipeline`: the client library. Start, follow, answer, list and schedule pipeline runs from TypeScript.
// docs/library.md describes every export.
export { PipelineClient, type ForkOptions, type PipelineClientOptions, type StartOptions } from './pipeline-client.js';
export type { ForkPreview } from './fork-run.js';
export { RunHandle } from './run-handle.js';
export type { ApproveOptions, CancelOutcome, EventsOptions, RunStatusReport } from './run-handle-options.js';
export type { FollowOptions, FollowOutcome } from './follow-run.js';
export type { RunEvent, StageProgress } from './run-events.js';
export type { TranscriptEntry, TranscriptOptions } from './run-transcript.js';
export { readFinalAnswer, type FinalAnswerOptions } from './final-answer.js';
export type { TranscriptFile } from './transcript-files.js';
export type { AgentActivity } from '../activities/backends/agent-activity.js';
export { PipelineSchedules, type CreateScheduleOptions, type OverlapPolicy, type ScheduleInfo } from './schedules.js';
export type { PrepareRunOptions } from './pipeline-source.js';
export { definePipeline, type BackendName, type PipelineDefinition, type PipelineSource, type StageDefaults, type StageDefinition } from './pipeline-definition.js';
export type { InputValue } from './input-files.js';
export { validatePipeline, type ValidateOptions, type ValidationReport } from './validate-pipeline.js';
export { RUN_LIST_STATUSES, type RunListFilter, type RunListItem, type RunListItemStatus, type RunListStatus, type RunPagingFilter } from './list-runs.js';
export type { RunIdConflictPolicy } from './runs.js';
export type { ConnectionOptions } from './connection.js';
export {
  AgentPipelineError,
  InvalidRequestError,
  NoWorkerError,
  PipelineInvalidError,
  RunFailedError,
  RunNotFoundError,
  TemporalUnavailableError,
  type AgentPipelineErrorCode,
  type InvalidRequestCode,
  type PipelineProblemReport,
  type RunFailureKind,
} from './errors.js';
export { ConfigError } from '../config.js';
export type { ForkedFrom, LeaseWaitState, RunState, RunStatus, StageState, StageStatus, WaitingFor } from '../pipeline/run-state.js';
export type { LeaseEntry, LeaseKeyState } from '../activities/leases/lease-client.js';
export type { ArtifactRef, FinalAnswerRef, StageResult, TokenUsage } from '../pipeline/stage-result.js';
export type { McpServer } from '../pipeline/agent-access-schema.js';
export type { Duration, DurationText, DurationUnit } from '../pipeline/schema.js';
export type { PipelineRunInput } from '../contracts/messages.js';
export type { AgentPromptDecision, AgentPromptRequest, AgentQuestion } from '../pipeline/agent-prompt.js';
export type { LiveAttempt } from './run-reader.js';
