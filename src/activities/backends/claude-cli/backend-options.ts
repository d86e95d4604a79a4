import type { ExitingAgents } from './agent-exits.js';
import type { AttemptSandbox } from './agent-settings.js';
import type { SandboxHost } from './sandbox-host.js';
import { DEFAULT_SANDBOX_MODE, type SandboxMode } from './sandbox-mode.js';
import type { ModelCatalog } from '../models.js';
import type { WarmPool } from './warm-pool.js';

/** Telemetry variables for one agent process (see `agentTelemetryEnv` in telemetry/agent-env.ts). */
export type AgentTelemetryEnv = (tags: { stage: string; attempt: number }) => Record<string, string>;

/**
 * Options of the Claude Code CLI backend, fixed per worker, and the objects its attempts share, which the worker
 * makes once when it starts (see worker/activities.ts) and hands in through `createActivities`.
 */
export interface ClaudeCliOptions {
  /** The environment the worker got; only an allow-list of it reaches the agent. */
  env: NodeJS.ProcessEnv;
  /**
   * Time between SIGTERM and SIGKILL whenever the agent or its tools are stopped (cancelled, stalled, timed out, left
   * over by an earlier attempt or a dead worker). @unit milliseconds @default 5000 (`AGENT_PIPELINE_KILL_GRACE`)
   */
  killGraceMs?: number;
  /** Prices for the cost reported while the agent runs. @default `loadModelCatalog(env)` */
  models?: ModelCatalog;
  /** The worker's agents whose stage completed on their result and that are still exiting; the next agent of a run waits for its run's. */
  exitingAgents: ExitingAgents;
  /** Agents started ahead of time for the stages to come (warm start); without a pool every agent starts cold. */
  warmPool?: WarmPool;
  /** The attempt span's TRACEPARENT, and Claude Code's own telemetry settings, for each agent. @default none */
  agentTelemetryEnv?: AgentTelemetryEnv;
  /**
   * Claude Code's sandbox around the agents' Bash (`AGENT_PIPELINE_SANDBOX`): `required` fails a stage the host cannot
   * sandbox and refuses a stage's `sandbox: false`; `permissive` honours it; `auto` sandboxes where it can and warns where
   * it cannot; `off` leaves it to the operator's settings. @default required
   */
  sandbox?: SandboxMode;
  /** What this host offers the sandbox, as the worker last checked it (`sandboxHostChecker`). @default checked on every attempt */
  sandboxHost?: () => Promise<SandboxHost>;
  /** Whether the worker requires signed runs: `permissive` then honours `sandbox: false` only in runs signed. @default false */
  signedRunsOnly?: boolean;
  /**
   * The worker's workspaces root, whose other runs and reserved folder its agents may not read.
   * @default the folder holding the run's folder
   */
  workspacesRoot?: string;
}

/** The attempt's sandbox inputs: the worker's mode and host, and whether its run was signed. */
export function attemptSandbox(options: ClaudeCliOptions, runSignedBy: string | undefined): AttemptSandbox {
  return {
    mode: options.sandbox ?? DEFAULT_SANDBOX_MODE,
    host: options.sandboxHost,
    signing: { required: options.signedRunsOnly === true, signedBy: runSignedBy },
  };
}

