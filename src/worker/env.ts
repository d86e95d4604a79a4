import { toMilliseconds } from '../pipeline/duration.js';
import { durationSchema } from '../pipeline/schema.js';
import { warmStartSettings, type WarmStartSettings } from '../activities/backends/claude-cli/warm-start.js';
import { sandboxModeFromEnv, type SandboxMode } from '../activities/backends/claude-cli/sandbox-mode.js';
import { ConfigError, sandboxAllowLocalFromEnv } from '../config.js';
import { apiKeyLimitsFromEnv } from '../activities/api-key/limits-env.js';
import type { ApiKeyLimits } from '../activities/api-key/key-limiter.js';
import { ALLOWED_PATHS_VARIABLE, parseFolderList, type AllowedPaths } from '../activities/workspace/allowed-paths.js';
import { PIPELINE_DIRS_VARIABLE, type PipelineDirs } from '../activities/prompt/worker-files.js';
import { healthFileFromEnv } from './health-file.js';

/** Worker settings read from the environment (docs/deployment.md lists them). */
export interface WorkerEnvOptions {
  /** Stage attempts (activities) one worker runs at once. @default 8 (`AGENT_PIPELINE_MAX_CONCURRENT_STAGES`) */
  maxConcurrentStages: number;
  /** Workflow tasks one worker processes at once. @default 40 (`AGENT_PIPELINE_MAX_CONCURRENT_WORKFLOW_TASKS`) */
  maxConcurrentWorkflowTasks: number;
  /**
   * On SIGTERM, how long running stages may go on before they are cancelled (their agents stopped) so that another
   * worker retries them, resuming the agent's session. @unit milliseconds @default 30s (`AGENT_PIPELINE_SHUTDOWN_GRACE`)
   */
  shutdownGraceMs: number;
  /** After the grace time, how long cancelled stages get to stop before the worker exits anyway. @unit milliseconds @default 60s */
  shutdownForceAfterGraceMs: number;
  /**
   * Whenever an agent or its tools are stopped (cancelled, stalled, timed out, left by a dead worker or an earlier
   * attempt): the time between SIGTERM and SIGKILL, for tools to release their locks. @unit milliseconds
   * @default 5s (`AGENT_PIPELINE_KILL_GRACE`)
   */
  killGraceMs: number;
  /** A file the worker touches every few seconds while it polls, for container health checks (`AGENT_PIPELINE_HEALTH_FILE`). */
  healthFile?: string;
  /** Warm start of CLI agents (`AGENT_PIPELINE_PREWARM=on|off`, `AGENT_PIPELINE_PREWARM_TTL`). */
  prewarm: WarmStartSettings;
  /**
   * Host folders runs may name in `workspace.repo` and `addDirs` besides the workspaces root
   * (`AGENT_PIPELINE_ALLOWED_PATHS`, separated like PATH, `*` for any); unset, the caller decides (none for a worker).
   */
  allowedPaths?: AllowedPaths;
  /**
   * Host folders whose pipelines runs that carry no files (`--files-from-worker`) may have read from the worker's disk
   * (`AGENT_PIPELINE_PIPELINE_DIRS`, separated like PATH, `*` for any); unset, the caller decides (none for a worker).
   */
  pipelineDirs?: PipelineDirs;
  /**
   * Claude Code's sandbox around CLI agents' Bash (`AGENT_PIPELINE_SANDBOX=required|permissive|auto|off`): `required`
   * fails a stage the host cannot sandbox (`SANDBOX_UNAVAILABLE`) and refuses a stage's `sandbox: false`
   * (`SANDBOX_OPT_OUT_REFUSED`); `permissive` honours it; `auto` sandboxes where it can and warns where it cannot.
   * @default required: a worker serves others, so it fails closed (`agent-pipeline dev` and `demo` use auto)
   */
  sandbox: SandboxMode;
  /**
   * Let pipelines list loopback and link-local hosts (`localhost`, `127.0.0.1`, `169.254.169.254`) in
   * `sandbox.allowedDomains`, so their agents reach this host's own services (`AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL=1`).
   * @default false: such runs fail their input check, and such stages `CONFIG_INVALID`
   */
  sandboxAllowLocal: boolean;
  /**
   * Limits on the worker's `ANTHROPIC_API_KEY`, shared with every worker using the key (`AGENT_PIPELINE_API_REQUESTS_PER_MINUTE`,
   * `AGENT_PIPELINE_API_CONCURRENT_REQUESTS`); unset, none. See docs/rate-limits.md.
   */
  apiKeyLimits: ApiKeyLimits;
  /**
   * One owner per run: how long a run's activity may wait on its owner's queue, and the owner's ping for an answer,
   * before the owner counts as gone and the run moves to another worker. @unit milliseconds
   * @default 60s (`AGENT_PIPELINE_OWNER_TIMEOUT`)
   */
  ownerTimeoutMs: number;
  /**
   * How long a run's next workflow task waits for the worker that has the run in its cache (its sticky queue) before any
   * worker of the queue takes it, replaying the history: after a worker dies its runs go on this much later (Temporal's
   * `stickyQueueScheduleToStartTimeout`). @unit milliseconds
   * @default 10s (`AGENT_PIPELINE_STICKY_TIMEOUT`)
   */
  stickyTimeoutMs: number;
  /**
   * How often the worker deletes the stored objects of runs Temporal no longer keeps (ended, and the namespace's
   * retention passed; store/run-records.ts); undefined: never. @unit milliseconds
   * @default 1h (`AGENT_PIPELINE_STORE_SWEEP`; `off` turns it off)
   */
  storeSweepMs: number | undefined;
}

function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new ConfigError(`[CONFIG_INVALID] ${name}=${raw} is not a whole number of 1 or more; unset it for the default ${fallback}`);
  return n;
}

function duration(env: NodeJS.ProcessEnv, name: string, fallback: string): number {
  const raw = env[name] || fallback;
  if (!durationSchema.safeParse(raw.trim()).success) throw new ConfigError(`[CONFIG_INVALID] ${name}=${raw} is not a duration; write it like 30s, 2m or 1h`);
  return toMilliseconds(raw.trim());
}

/** Reads and checks the worker's settings. @throws ConfigError naming the variable, its value and the fix. */
export function workerOptionsFromEnv(env: NodeJS.ProcessEnv): WorkerEnvOptions {
  return {
    maxConcurrentStages: positiveInt(env, 'AGENT_PIPELINE_MAX_CONCURRENT_STAGES', 8),
    maxConcurrentWorkflowTasks: positiveInt(env, 'AGENT_PIPELINE_MAX_CONCURRENT_WORKFLOW_TASKS', 40),
    shutdownGraceMs: duration(env, 'AGENT_PIPELINE_SHUTDOWN_GRACE', '30s'),
    shutdownForceAfterGraceMs: duration(env, 'AGENT_PIPELINE_SHUTDOWN_FORCE', '60s'),
    killGraceMs: duration(env, 'AGENT_PIPELINE_KILL_GRACE', '5s'),
    healthFile: healthFileFromEnv(env),
    prewarm: readWarmStart(env),
    allowedPaths: parseFolderList(env[ALLOWED_PATHS_VARIABLE]),
    pipelineDirs: parseFolderList(env[PIPELINE_DIRS_VARIABLE]),
    sandbox: readSetting(() => sandboxModeFromEnv(env)),
    sandboxAllowLocal: sandboxAllowLocalFromEnv(env),
    apiKeyLimits: readSetting(() => apiKeyLimitsFromEnv(env)),
    ownerTimeoutMs: duration(env, 'AGENT_PIPELINE_OWNER_TIMEOUT', '60s'),
    stickyTimeoutMs: duration(env, 'AGENT_PIPELINE_STICKY_TIMEOUT', '10s'),
    storeSweepMs: env.AGENT_PIPELINE_STORE_SWEEP?.trim().toLowerCase() === 'off' ? undefined : duration(env, 'AGENT_PIPELINE_STORE_SWEEP', '1h'),
  };
}

function readWarmStart(env: NodeJS.ProcessEnv): WarmStartSettings {
  return readSetting(() => warmStartSettings(env));
}

function readSetting<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}
