import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AttemptProgress, BackendRequest, PrewarmTarget } from '../../src/activities/backends/stage-backend.js';
import { agentSecretValues } from '../../src/activities/backends/claude-cli/agent-auth.js';
import { ExitingAgents } from '../../src/activities/backends/claude-cli/agent-exits.js';
import { runClaudeCli } from '../../src/activities/backends/claude-cli/backend.js';
import { attemptSandbox, type ClaudeCliOptions } from '../../src/activities/backends/claude-cli/backend-options.js';
import { findClaudeBinary } from '../../src/activities/backends/claude-cli/claude-binary.js';
import { WarmPool, type WarmPoolOptions } from '../../src/activities/backends/claude-cli/warm-pool.js';
import { prewarmStages } from '../../src/activities/backends/claude-cli/warm-start.js';
import { isGone } from '../../src/activities/process/stop.js';
import { findMarkedProcesses, STAGE_MARKER } from '../../src/activities/process/sweep.js';
import { SecretRegistry } from '../../src/activities/secrets.js';
import { openRunWorkspace, type RunWorkspace } from '../../src/activities/workspace/run-workspace.js';
import { startModelServer, type ModelServer } from '../../src/dev/model-server.js';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import type { StageDefinition } from '../../src/pipeline/stage-schema.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';
import { TEST_SANDBOX_MODE } from '../helpers/sandbox-host.js';

/*
 * A world for calling the Claude Code CLI backend directly: the real `claude` binary against the
 * scripted model server, in a fresh workspaces folder. Each attempt gets its own run folder. The world
 * is one worker: its attempts share a warm pool and the agents still exiting, as a worker's do.
 */

/** The API key the tests give the agent; it must never show up in anything the backend reports. */
export const TEST_API_KEY = 'sk-ant-test-4f9d2c71b3e8a6';

/** The kill grace of the world's attempts and of its warm pool. @unit milliseconds */
export const KILL_GRACE_MS = 2_000;

/** A warm pool as a worker makes it with the default settings. */
export function warmPool(options: Partial<WarmPoolOptions> = {}): WarmPool {
  return new WarmPool({ ttlMs: 120_000, killGraceMs: KILL_GRACE_MS, limit: 8, ...options });
}

/** The final answer every successful scripted agent gives. */
export const REPORT = '```json\n{"success": true, "summary": "done", "outputs": {}}\n```';

export interface AttemptSetup {
  /** The first user message; scenario rules match on it. */
  task: string;
  stage?: Partial<StageDefinition>;
  request?: Partial<Omit<BackendRequest, 'stage' | 'workspace'>>;
  /** Reuse the run folder of an earlier attempt. */
  runId?: string;
  env?: NodeJS.ProcessEnv;
  options?: Partial<ClaudeCliOptions>;
}

export interface Attempt {
  request: BackendRequest;
  heartbeats: AttemptProgress[];
  controller: AbortController;
  /** The run folder (the agent's working directory). */
  dir: string;
  /** The stage's bookkeeping folder (lock, MCP config); the agent's processes are marked `<stageDir>#<attempt token>`. */
  stageDir: string;
  outcome: ReturnType<typeof runClaudeCli>;
}

export interface CliWorld {
  server: ModelServer;
  root: string;
  env: NodeJS.ProcessEnv;
  /** The agents of completed stages still exiting, shared by the world's attempts. */
  exitingAgents: ExitingAgents;
  start(setup: AttemptSetup): Promise<Attempt>;
  /**
   * Starts agents for `targets` in run `runId` as an attempt of that run does while it works (`prewarmStages`, with
   * the options `start` gives the backend), without the attempt: for tests of what becomes of a waiting agent, where
   * the attempt's own agent checked nothing and cost a `claude` start (issue 32). Resolves to the keys of the agents
   * started and the run's workspace.
   */
  prewarm(runId: string, targets: PrewarmTarget[], options?: Partial<ClaudeCliOptions>): Promise<{ keys: string[]; workspace: RunWorkspace }>;
  close(): Promise<void>;
}

export async function createCliWorld(scenario: ScenarioInput): Promise<CliWorld> {
  const server = await startModelServer({ scenario, log: () => {} });
  const root = await mkdtemp(path.join(tmpdir(), 'claude-cli-test-'));
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: await emptyHome(root), ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: TEST_API_KEY };
  let runs = 0;
  const exitingAgents = new ExitingAgents();
  const pool = warmPool();
  /** What the world's worker gives the backend for an attempt (with the attempt's environment). */
  const backendOptions = (attemptEnv: NodeJS.ProcessEnv, options: Partial<ClaudeCliOptions> = {}): ClaudeCliOptions => ({
    env: attemptEnv,
    killGraceMs: KILL_GRACE_MS,
    exitingAgents,
    warmPool: pool,
    sandbox: TEST_SANDBOX_MODE,
    ...options,
  });
  return {
    server,
    root,
    env,
    exitingAgents,
    async start(setup) {
      const runId = setup.runId ?? `run-${++runs}`;
      const definition: StageDefinition = { id: 'work', prompt: 'unused', allowedTools: ['Bash', 'Edit', 'Write', 'Read'], ...setup.stage };
      const stage = resolveStage({ name: 'test', stages: [definition] }, definition);
      const workspace = await openRunWorkspace(root, { runId });
      const heartbeats: AttemptProgress[] = [];
      const controller = new AbortController();
      const attempt = setup.request?.attempt ?? 1;
      const request: BackendRequest = {
        runId,
        stage,
        workspace,
        attempt,
        prompt: { system: 'You are a test agent.', user: setup.task },
        transcriptPath: path.join(workspace.stageDir(stage.id), `attempt-${attempt}.jsonl`),
        signal: controller.signal,
        heartbeat: (progress) => heartbeats.push(progress),
        claimFile: () => undefined,
        ...setup.request,
      };
      const attemptEnv = { ...env, ...setup.env };
      // As `createActivities` runs each activity: with the worker's secrets, the agent's keys among them.
      const secrets = new SecretRegistry(agentSecretValues(attemptEnv));
      const options = backendOptions(attemptEnv, setup.options);
      const outcome = secrets.run(() => runClaudeCli(request, options));
      // Callers assert on the outcome later; keep an early rejection from counting as unhandled.
      outcome.catch(() => undefined);
      return { request, heartbeats, controller, dir: workspace.dir, stageDir: workspace.stageDir(stage.id), outcome };
    },
    async prewarm(runId, targets, setupOptions) {
      const options = backendOptions(env, setupOptions);
      const workspace = await openRunWorkspace(root, { runId });
      const binary = await findClaudeBinary(options.env);
      if (!binary || !options.warmPool) throw new Error('prewarm needs the claude binary and a warm pool');
      // The context an attempt's prewarm gives (agent-run.ts, prewarmNextStages): its binary, kill grace and sandbox.
      const context = { binary, workerEnv: options.env, killGraceMs: options.killGraceMs!, workspace, sandbox: attemptSandbox(options, undefined), workspacesRoot: options.workspacesRoot };
      return { keys: await prewarmStages(options.warmPool, targets, context), workspace };
    },
    async close() {
      await pool.stopAll();
      await server.close();
      await rm(root, { recursive: true, force: true });
    },
  };
}

/**
 * A HOME without dotfiles for the agents: the CLI's Bash tool sources `~/.bashrc` into a shell
 * snapshot, and this box's runs pyenv, which is slow and leaves a stale lock when a test kills it.
 */
export async function emptyHome(parent: string): Promise<string> {
  const home = path.join(parent, 'home');
  await mkdir(home, { recursive: true });
  return home;
}

/** The failure a promise rejected with. */
export async function failureOf(promise: Promise<unknown>): Promise<Error & { type?: string; nonRetryable?: boolean; nextRetryDelay?: unknown; details?: unknown[] }> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the attempt to fail, but it succeeded');
}

/**
 * Pids of live (non-zombie) processes whose environment holds `NAME=value` (or, as a prefix, `NAME=value…`): the
 * worker's own search (sweep.ts), whose synchronous reads of /proc cost a tenth of what a promise a file did (2.5 ms a
 * look at 165 processes, not 21): tests look every 100 ms while they wait (issue 32).
 */
export async function processesWith(name: string, value: string, match: 'exact' | 'prefix' = 'exact'): Promise<number[]> {
  const pids = await findMarkedProcesses(name, value, match);
  return pids.filter((pid) => !isGone(pid));
}

/** Pids of the live processes of a stage's attempts (the CLI and its tools). */
export function stageProcesses(stageDir: string): Promise<number[]> {
  return processesWith(STAGE_MARKER, `${stageDir}#`, 'prefix');
}

/** The command line of a process, or '' once it is gone. */
export async function commandLine(pid: number): Promise<string> {
  return (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0').join(' ').trim();
}

/** Polls `probe` until `accept` holds, failing with `what` after `timeoutMs`. */
export async function waitFor<T>(probe: () => Promise<T> | T, accept: (value: T) => boolean, what: string, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (accept(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(value)}`);
    await sleep(100);
  }
}
