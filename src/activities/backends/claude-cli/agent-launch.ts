import type { ResultPromise } from 'execa';
import { randomUUID } from 'node:crypto';
import { stageFailure } from '../../failures.js';
import { openStageFolder } from '../../workspace/run-workspace.js';
import type { BackendRequest } from '../stage-backend.js';
import { describeClaudeLookup, findClaudeBinary } from './claude-binary.js';
import { AUTH_MODES_HELP, detectAgentAuth } from './agent-auth.js';
import { agentEnvironment, buildCliArgs, type CliFiles } from './args.js';
import { writeAgentFiles } from './agent-files.js';
import { planSession, type SessionPlan } from './session.js';
import { workerMarkerValue } from '../../process/orphan-watchdog.js';
import { DEFAULT_KILL_GRACE_MS } from '../../process/stop.js';
import { StageGuard } from '../../process/stage-guard.js';
import { warmKey } from './warm-start.js';
import { attemptSandbox, type ClaudeCliOptions } from './backend-options.js';

/**
 * Fails the attempt before anything starts when the agent could not run: no credentials, `bare` without an API key,
 * no `claude` binary, or already cancelled. Resolves to the binary.
 */
export async function checkCanStart(request: BackendRequest, options: ClaudeCliOptions): Promise<string> {
  const { stage } = request;
  if (!detectAgentAuth(options.env)) {
    throw stageFailure({
      type: 'API_KEY_MISSING',
      stageId: stage.id,
      message: `the worker has no credentials to give the Claude Code CLI`,
      hint: `set one of ${AUTH_MODES_HELP} in the environment of the worker and restart it`,
    });
  }
  if (stage.bare && !options.env.ANTHROPIC_API_KEY) {
    throw stageFailure({
      type: 'CONFIG_INVALID',
      stageId: stage.id,
      message: '`bare: true` makes the Claude Code CLI read only ANTHROPIC_API_KEY, and the worker has none (only ANTHROPIC_AUTH_TOKEN)',
      hint: 'set ANTHROPIC_API_KEY for the worker, or drop `bare: true` from the stage or the defaults',
    });
  }
  const binary = await findClaudeBinary(options.env);
  if (!binary) {
    throw stageFailure({ type: 'CLI_NOT_INSTALLED', stageId: stage.id, message: `the Claude Code CLI was not found (looked for ${describeClaudeLookup(options.env)})`, details: { claudeBin: options.env.CLAUDE_BIN } });
  }
  if (request.signal.aborted) throw request.signal.reason;
  return binary;
}

/** How an attempt's agent starts, decided before it does. */
export interface AgentLaunch {
  binary: string;
  args: string[];
  env: Record<string, string>;
  stageDir: string;
  killGraceMs: number;
  /** The stage's lock and marker; what an earlier attempt left there is stopped. */
  guard: StageGuard;
  session: SessionPlan;
  /** The files the command line names: a cold start that replaces a dead warm agent builds its command line again. */
  files: CliFiles;
  /** The process started for this stage ahead of time, when it matched and was taken over. */
  adopted?: ResultPromise;
  /** About a process started ahead of time that did not match, and about a stage that ran without its sandbox. */
  warnings: string[];
}

/**
 * Claims the stage (stopping what an earlier attempt left), writes the agent's files, plans its session and command
 * line, and takes over the process started for this stage ahead of time when it matches them exactly.
 */
export async function prepareLaunch(request: BackendRequest, options: ClaudeCliOptions, binary: string): Promise<AgentLaunch> {
  const { stage, workspace } = request;
  // Created here, never through a symlink: the settings, MCP config and system prompt files go in it.
  const stageDir = await openStageFolder(workspace, stage.id);
  const killGraceMs = options.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  const pool = options.warmPool;
  const key = warmKey(workspace, stage.id);
  // A process started for this stage ahead of time carries its own stage marker and session id: the attempt takes
  // them on, so that its command line and environment can match the waiting process's exactly.
  const waiting = pool?.peek(key);
  const guard = await StageGuard.claim(stageDir, killGraceMs, waiting?.marker);
  const env = {
    ...agentEnvironment(options.env, workspace.claudeConfigDir, { stage: guard.marker, worker: workerMarkerValue(killGraceMs) }),
    // The attempt span's TRACEPARENT, and Claude Code's own telemetry when AGENT_PIPELINE_AGENT_TELEMETRY=1.
    ...options.agentTelemetryEnv?.({ stage: stage.id, attempt: request.attempt }),
  };
  const { files, warnings } = await writeAgentFiles({
    stage, workspace, stageDir, agentEnv: env, binary, workerEnv: options.env, sandbox: attemptSandbox(options, request.runSignedBy),
    workspacesRoot: options.workspacesRoot, addDirs: request.addDirs, mcpServers: request.mcpServers, system: request.prompt.system,
  });
  const session = await planSession(request);
  if (waiting && !session.resume) session.sessionId = waiting.sessionId;
  // Only a process started ahead of time reads its prompt as stream-json (see `CliFiles.streamInput`).
  let args = buildCliArgs(request, session, { ...files, streamInput: waiting !== undefined });
  const took = pool && waiting ? await pool.take(key, { binary, args, cwd: workspace.dir, env }) : undefined;
  if (took?.kind === 'discarded') {
    warnings.push(`an agent started ahead of time was waiting for this stage, but ${took.reason}; it was stopped and the stage started cold`);
  }
  if (waiting && took?.kind !== 'adopted') {
    // The cold start writes its prompt as plain text, so its command line drops the stream-json input, also when it
    // resumes a session (a rework round, an answer). The stopped process may have registered its own session id: a
    // fresh session takes a new one.
    if (!session.resume) session.sessionId = randomUUID();
    args = buildCliArgs(request, session, files);
  }
  return { binary, args, env, stageDir, killGraceMs, guard, session, files, adopted: took?.kind === 'adopted' ? took.child : undefined, warnings };
}
