import type { WorkerOptions } from '@temporalio/worker';
import type { ApiKeyLimits } from '../activities/api-key/key-limiter.js';
import type { StageBackend } from '../activities/backends/stage-backend.js';
import type { SandboxMode } from '../activities/backends/claude-cli/sandbox-mode.js';
import type { PipelineDirs } from '../activities/prompt/worker-files.js';
import type { AllowedPaths } from '../activities/workspace/allowed-paths.js';
import type { WorkerTelemetry } from '../telemetry/worker-telemetry.js';

/** Options for a worker; everything else comes from the environment (see docs/configuration.md). */
export interface StartWorkerOptions {
  env?: NodeJS.ProcessEnv;
  /** Overrides `TEMPORAL_ADDRESS`, e.g. for the embedded dev server. */
  address?: string;
  /** Overrides `AGENT_PIPELINE_TASK_QUEUE`; tests give each file its own queue. */
  taskQueue?: string;
  /**
   * A prebuilt workflow bundle to load instead of the one next to this file. A worker with an encryption key needs one
   * built with the encoded failure converter (`workflow-bundle-encrypted.js`), or its workflows' failures stay plain.
   */
  workflowBundlePath?: string;
  /** Extra worker options, e.g. `maxCachedWorkflows` or the task slots. */
  workerOptions?: Partial<WorkerOptions>;
  /** Overrides `TEMPORAL_NAMESPACE`. */
  namespace?: string;
  /** Overrides `AGENT_PIPELINE_WORKSPACES`. */
  workspacesRoot?: string;
  /** Overrides `AGENT_PIPELINE_MAX_CONCURRENT_STAGES`. */
  maxConcurrentStages?: number;
  /** Backends besides `claude-cli` and `anthropic-api`, by the name a stage's `backend:` selects. */
  backends?: Record<string, StageBackend>;
  /** Traces and metrics (see src/telemetry/); none by default. */
  telemetry?: WorkerTelemetry;
  /**
   * Host folders runs may name in `workspace.repo` and `addDirs` besides the workspaces root, or `'any'`.
   * @default `AGENT_PIPELINE_ALLOWED_PATHS`, else none
   */
  allowedPaths?: AllowedPaths;
  /**
   * Host folders whose pipelines runs that carry no files (`--files-from-worker`) may have read, or `'any'`.
   * @default `AGENT_PIPELINE_PIPELINE_DIRS`, else none (such runs are refused)
   */
  pipelineDirs?: PipelineDirs;
  /**
   * Keys that encrypt and decrypt payloads (`"<keyId>:<base64>[,...]"`, the first encrypting); an empty string turns
   * encryption off. @default `AGENT_PIPELINE_ENCRYPTION_KEY`, else none
   */
  encryptionKey?: string;
  /** Overrides `AGENT_PIPELINE_API_REQUESTS_PER_MINUTE` and `AGENT_PIPELINE_API_CONCURRENT_REQUESTS` (docs/rate-limits.md). */
  apiKeyLimits?: ApiKeyLimits;
  /** Overrides `AGENT_PIPELINE_SANDBOX`. @default `AGENT_PIPELINE_SANDBOX`, else `required` */
  sandbox?: SandboxMode;
  /**
   * How long a host found unable to sandbox is believed before the worker checks it again (tests shorten it).
   * @unit milliseconds @default SANDBOX_RECHECK_MS (5 s)
   */
  sandboxRecheckMs?: number;
  /**
   * How long a run waiting for a pipeline-level key waits in the key's workflow before it reports its place (and
   * heartbeats, so a cancel reaches it): tests shorten it. @unit milliseconds @default RUN_LEASE_POLL_MS (10 s)
   */
  leasePollMs?: number;
}
