// `agent-pipeline/worker`: a pipeline worker to embed in your own program, with backends of your own.
import type { Worker, WorkerOptions } from '@temporalio/worker';
import type { StageBackend } from '../activities/backends/stage-backend.js';
import { createPipelineWorker as createWorker } from '../run-worker.js';

/** Options of {@link createPipelineWorker}. Anything left out comes from the environment, as for `agent-pipeline worker`. */
export interface PipelineWorkerOptions {
  /** `host:port` of Temporal. @default `TEMPORAL_ADDRESS`, else the temporal.toml profile, else `localhost:7233` */
  address?: string;
  /** @default `TEMPORAL_NAMESPACE`, else `default` */
  namespace?: string;
  /** @default `AGENT_PIPELINE_TASK_QUEUE`, else `agent-pipeline` */
  taskQueue?: string;
  /** Folder holding one workspace per run; shared storage when several hosts run workers. @default `AGENT_PIPELINE_WORKSPACES`, else `.agent-pipeline/workspaces` */
  workspacesRoot?: string;
  /** Stage attempts run at once. @default `AGENT_PIPELINE_MAX_CONCURRENT_STAGES`, else 8 */
  maxConcurrentStages?: number;
  /**
   * Backends besides `claude-cli` and `anthropic-api`, by the name a stage's `backend:` selects. Give every worker of
   * the task queue the same ones, and tell clients their names (`PipelineClient.connect({ backends: [...] })`).
   */
  backends?: Record<string, StageBackend>;
  /** Where the worker (and the agents it starts) read their settings: keys, `CLAUDE_BIN`, … @default `process.env` */
  env?: NodeJS.ProcessEnv;
  /** More Temporal worker options, applied last. */
  workerOptions?: Partial<WorkerOptions>;
  /**
   * Encrypts and decrypts every payload with AES-256-GCM: `"<keyId>:<base64 of 32 bytes>[,<keyId>:<base64>...]"`, the
   * first key encrypting; the clients need the same keys (docs/security.md). @default `AGENT_PIPELINE_ENCRYPTION_KEY`, else off
   */
  encryptionKey?: string;
}

/**
 * Connects to Temporal and creates a worker for the pipeline workflow and its stage activities, ready to `run()`.
 * `worker.run()` resolves once the worker has shut down (SIGINT/SIGTERM or `worker.shutdown()`); then close its
 * connection with `await worker.connection?.close()`.
 * @throws ConfigError for settings it cannot use (a built-in backend name taken, a bad variable).
 */
export function createPipelineWorker(options: PipelineWorkerOptions = {}): Promise<Worker> {
  return createWorker(options);
}

export type { AttemptProgress, BackendOutcome, BackendRequest, StageBackend } from '../activities/backends/stage-backend.js';
/** @deprecated use StageBackend */
export type Backend = StageBackend;
export type { StagePrompt } from '../activities/prompt/stage-prompt.js';
export type { RunWorkspace } from '../activities/workspace/run-workspace.js';
export type { ResolvedStage } from '../pipeline/stage-options.js';
export type { StageResult, TokenUsage } from '../pipeline/stage-result.js';
export { FAILURES, stageFailure, type FailureType, type StageFailureOptions } from '../activities/failures.js';
