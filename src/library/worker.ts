// `agent-pipeline/worker`: a pipeline worker to embed in your own program, with backends of your own.
import { DefaultLogger, Runtime, type Logger, type LogLevel, type Worker, type WorkerOptions } from '@temporalio/worker';
import { ConfigError } from '../config.js';
import { formatLogEntry, loggingOptionsFromEnv } from '../logging.js';
import type { StageBackend } from '../activities/backends/stage-backend.js';
import { createPipelineWorker as createWorker } from '../worker/create-worker.js';
import type { SandboxMode } from '../activities/backends/claude-cli/sandbox-mode.js';

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
  /**
   * How much the worker logs (Temporal's lines and the stages'): `'silent'` in tests, or the least severe level
   * shown. Temporal's logging is one per process, set before its first worker or connection: give the same value to
   * every worker of the process. @default the SDK's own logging (INFO to the console)
   */
  logLevel?: WorkerLogLevel;
  /** A logger of your own (Temporal's `Logger` interface) instead of `logLevel`; the same rule of one per process applies. */
  logger?: Logger;
  /**
   * Claude Code's sandbox around CLI agents' Bash: `'required'` fails a stage the host cannot sandbox and refuses a
   * stage's `sandbox: false`; `'permissive'` honours it (in signed runs only, with trusted keys); `'auto'` runs
   * unsandboxed, with a warning, where the host cannot sandbox; `'off'` leaves it to the operator's Claude Code settings
   * (docs/security.md). Until this release the default was `'auto'`: set it on machines without bubblewrap and socat.
   * @default `AGENT_PIPELINE_SANDBOX`, else `'required'`
   */
  sandbox?: SandboxMode;
}

/** Levels of {@link PipelineWorkerOptions.logLevel}: Temporal's, least severe first, or `silent`. */
export type WorkerLogLevel = LogLevel | 'silent';

/** What each Temporal runtime this library installed was asked for; the runtime is one per process, so is its logging. */
const installedLogging = new WeakMap<Runtime, WorkerLogLevel | Logger>();

/** A logger at `level` writing as the worker command does (`AGENT_PIPELINE_LOG_FORMAT`), or one that drops everything. */
function levelLogger(level: WorkerLogLevel, env: NodeJS.ProcessEnv): Logger {
  if (level === 'silent') return new DefaultLogger('ERROR', () => undefined);
  const { format } = loggingOptionsFromEnv({ ...env, AGENT_PIPELINE_LOG_LEVEL: undefined }, Boolean(process.stderr.isTTY));
  return new DefaultLogger(level, (entry) => void process.stderr.write(`${formatLogEntry(entry, format)}\n`));
}

/** Installs Temporal's runtime with the logging `options` ask for, once per process. @throws ConfigError when another was installed already */
function installLogging(options: PipelineWorkerOptions): void {
  const choice = options.logger ?? options.logLevel;
  if (choice === undefined) return;
  const current = Runtime._instance;
  if (current) {
    if (installedLogging.get(current) === choice) return;
    throw new ConfigError(
      `[CONFIG_INVALID] logLevel/logger: Temporal's logging was already set in this process (by an earlier worker or connection); ` +
        'give the same logLevel to every createPipelineWorker, and create them before any other Temporal worker or connection',
    );
  }
  const logger = typeof choice === 'string' ? levelLogger(choice, options.env ?? process.env) : choice;
  const filter = choice === 'silent' ? 'ERROR' : 'WARN';
  installedLogging.set(Runtime.install({ logger, telemetryOptions: { logging: { forward: {}, filter: { core: filter, other: 'ERROR' } } } }), choice);
}

/**
 * Connects to Temporal and creates a worker for the pipeline workflow and its stage activities, ready to `run()`.
 * `worker.run()` resolves once the worker has shut down (SIGINT/SIGTERM or `worker.shutdown()`); then close its
 * connection with `await worker.connection?.close()`.
 * @throws ConfigError for settings it cannot use (a built-in backend name taken, a bad variable).
 */
export async function createPipelineWorker(options: PipelineWorkerOptions = {}): Promise<Worker> {
  installLogging(options);
  return createWorker(options);
}

export type { AttemptProgress, BackendOutcome, BackendRequest, StageBackend } from '../activities/backends/stage-backend.js';
/** @deprecated use StageBackend */
export type Backend = StageBackend;
export type { StagePrompt } from '../activities/prompt/stage-prompt.js';
export type { SandboxMode } from '../activities/backends/claude-cli/sandbox-mode.js';
export type { RunWorkspace } from '../activities/workspace/run-workspace.js';
export type { ResolvedStage } from '../pipeline/stage-options.js';
export type { StageResult, TokenUsage } from '../pipeline/stage-result.js';
export { stageFailure, type StageFailureOptions } from '../activities/failures.js';
export { FAILURES, type FailureType } from '../failure-types.js';
