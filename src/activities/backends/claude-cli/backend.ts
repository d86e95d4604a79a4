import { Context } from '@temporalio/activity';
import type { ResultPromise } from 'execa';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { stageFailure } from '../../failures.js';
import { currentRedaction, currentSecretValues, redactSecrets } from '../../secrets.js';
import { openStageFolder, writeFileAtomic } from '../../workspace/run-workspace.js';
import { workerFolderOfRun } from '../../workspace/worker-folder.js';
import { ownFolderDenyRules } from './own-folder-rules.js';
import { quietHeartbeatIntervalMs, type AttemptProgress, type BackendOutcome, type BackendRequest } from '../stage-backend.js';
import { describeClaudeLookup, findClaudeBinary } from './claude-binary.js';
import { AUTH_MODES_HELP, detectAgentAuth, workerSecretValues } from './agent-auth.js';
import type { ExitingAgents } from './agent-exits.js';
import { agentEnvironment, asksMidTurn, buildCliArgs, streamJsonPrompt, type CliFiles } from './args.js';
import { PromptBridge } from './control-protocol.js';
import { prepareAgentSettings, type AttemptSandbox } from './agent-settings.js';
import type { SandboxHost } from './sandbox-host.js';
import { DEFAULT_SANDBOX_MODE, type SandboxMode } from './sandbox-mode.js';
import { readScopeOf } from './agent-reads.js';
import { CliEventReader } from './events.js';
import { classifyCliRun } from './failure.js';
import { runCliProcess, type CliProcessResult } from './agent-process.js';
import { planSession, sessionExists, type SessionPlan } from './session.js';
import { writeMcpConfig } from './mcp-config.js';
import { loadModelCatalog, type ModelCatalog } from '../models.js';
import { workerMarkerValue } from '../../process/orphan-watchdog.js';
import { STAGE_MARKER } from '../../process/sweep.js';
import { DEFAULT_KILL_GRACE_MS, stopMarkedProcesses } from '../../process/stop.js';
import { StageGuard } from '../../process/stage-guard.js';
import { TranscriptWriter } from './transcript-writer.js';
import { prewarmStages, warmKey } from './warm-start.js';
import type { WarmPool } from './warm-pool.js';

/** Telemetry variables for one agent process (see `agentTelemetryEnv` in telemetry/agent-env.ts). */
export type AgentTelemetryEnv = (tags: { stage: string; attempt: number }) => Record<string, string>;

/**
 * Options of the Claude Code CLI backend, fixed per worker, and the objects its attempts share, which the worker
 * makes once when it starts (see run-worker.ts) and hands in through `createActivities`.
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

/**
 * Runs one stage attempt through `claude -p`: stops whatever an earlier attempt left in the stage,
 * resumes the earlier session when there is one, streams events into heartbeats and the transcript,
 * stops a stalled or cancelled agent, and maps the result to the outcome or to a catalogue failure.
 * On cancellation the abort reason is rethrown once the agent is gone; partial work stays.
 */
export async function runClaudeCli(request: BackendRequest, options: ClaudeCliOptions): Promise<BackendOutcome> {
  const binary = await checkCanStart(request, options);
  // An agent of this run that completed its stage may still be shutting down: it may hold this stage's lock, or be
  // writing the session this attempt resumes.
  await options.exitingAgents.exited(request.workspace.claudeConfigDir);
  const launch = await prepareLaunch(request, options, binary);
  const ended = await runAgent(request, options, launch);
  return await attemptOutcome(request, options, launch, ended);
}

/**
 * Fails the attempt before anything starts when the agent could not run: no credentials, `bare` without an API key,
 * no `claude` binary, or already cancelled. Resolves to the binary.
 */
async function checkCanStart(request: BackendRequest, options: ClaudeCliOptions): Promise<string> {
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
interface AgentLaunch {
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
async function prepareLaunch(request: BackendRequest, options: ClaudeCliOptions, binary: string): Promise<AgentLaunch> {
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
  const { files, warnings } = await writeAgentFiles(request, options, stageDir, env);
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

/** Writes the MCP configuration, the system prompt and the settings the command line names; warns of a missing sandbox. */
async function writeAgentFiles(request: BackendRequest, options: ClaudeCliOptions, stageDir: string, env: Record<string, string>): Promise<{ files: CliFiles; warnings: string[] }> {
  const { stage, workspace } = request;
  const scope = readScopeOf(workspace, stage.id, request.addDirs, options.workspacesRoot);
  const settings = await prepareAgentSettings(stage, options.env, scope, attemptSandbox(options, request.runSignedBy), ownFolderDenyRules(workerFolderOfRun(workspace.bookkeeping), options.env));
  const mcpConfig = await writeMcpConfig({ stageId: stage.id, pipelineServers: request.mcpServers, stageServers: stage.mcpServers, dir: stageDir, cwd: workspace.dir, env });
  const systemPrompt = request.prompt.system ? path.join(stageDir, 'system-prompt.md') : undefined;
  if (systemPrompt) await writeFileAtomic(systemPrompt, request.prompt.system);
  return { files: { mcpConfig, systemPrompt, settings: settings.file }, warnings: [...settings.sandbox.warnings] };
}

/** How the agent's run ended, as far as the attempt waits for it. */
interface AgentRunEnd {
  run: CliProcessResult;
  reader: CliEventReader;
  durationMs: number;
  /** The keys of the processes this attempt started ahead of time for the stages after it. */
  prewarming?: Promise<string[]>;
}

/**
 * Runs the agent to its exit (or to its result, when the attempt settles on it) while recording its transcript, then
 * releases the stage: at once, or once an agent that settled on its result has exited. An adopted warm agent that died
 * before it began on its prompt is replaced, once, by a cold one.
 */
async function runAgent(request: BackendRequest, options: ClaudeCliOptions, launch: AgentLaunch): Promise<AgentRunEnd> {
  const { stage, workspace } = request;
  const { guard } = launch;
  // Every secret the worker registered (the signing key and the API client's key included); a backend called outside
  // an activity still hides the environment's.
  const transcript = await TranscriptWriter.open(request.transcriptPath, currentSecretValues() ?? workerSecretValues(options.env));
  const started = Date.now();
  const attemptDone = options.warmPool ? await options.warmPool.attemptStarted() : undefined;
  let prewarming: Promise<string[]> | undefined;
  const prompts = request.askPerson && asksMidTurn(stage) ? new PromptBridge(request.askPerson) : undefined;
  const finishAttempt = async (): Promise<void> => {
    await transcript.close().catch(() => undefined);
    // Whatever the agent left running (a background server a tool started) goes with the attempt.
    await guard.release();
    attemptDone?.();
  };
  const onSpawn = async (pid: number): Promise<void> => {
    await guard.lock(pid, request.attempt);
    // Once per attempt, also when a cold agent replaces a dead warm one.
    prewarming ??= prewarmNextStages(request, options, launch);
  };
  let ran: AgentProcessEnd;
  // Set when the attempt settled on the agent's result while the process still exits: the attempt ends in the background.
  let exiting: Promise<CliProcessResult> | undefined;
  try {
    ran = await runAgentProcess(request, options, launch, { transcript, prompts, onSpawn });
    if (await diedBeforeItsPrompt(request, launch, ran.run)) {
      await startColdInstead(request, launch, ran.run);
      ran = await runAgentProcess(request, options, launch, { transcript, prompts, onSpawn });
    }
    exiting = ran.run.exit;
  } catch (err) {
    // Only the attempt's own records can fail here: the transcript, or the lock file once the agent started.
    throw stageFailure({ type: 'WORKSPACE_ERROR', stageId: stage.id, message: `could not record the attempt in ${launch.stageDir} (${(err as Error).message}); the agent was stopped`, cause: err as Error });
  } finally {
    if (!exiting) await finishAttempt();
  }
  if (exiting) {
    const warn = attemptWarn();
    const ended = followToExit(stage.id, exiting, warn)
      .then(finishAttempt)
      .catch((err: unknown) => warn(`could not finish the attempt of stage ${stage.id} after its agent exited: ${(err as Error).message}`));
    options.exitingAgents.track(workspace.claudeConfigDir, ended);
  }
  return { ...ran, durationMs: Date.now() - started, prewarming };
}

/** One `claude` process of the attempt, and what it said. */
interface AgentProcessEnd {
  run: CliProcessResult;
  reader: CliEventReader;
}

/** What the attempt's agent processes share: its transcript, its permission prompts, and what happens once one exists. */
interface AgentProcessContext {
  transcript: TranscriptWriter;
  prompts?: PromptBridge;
  onSpawn(pid: number): Promise<void>;
}

/** Runs one `claude` process of the attempt as `launch` says: the adopted warm one, or a new one. */
async function runAgentProcess(request: BackendRequest, options: ClaudeCliOptions, launch: AgentLaunch, context: AgentProcessContext): Promise<AgentProcessEnd> {
  const { stage, workspace } = request;
  const { session, guard } = launch;
  const { transcript, prompts, onSpawn } = context;
  const reader = new CliEventReader(session.sessionId, options.models ?? loadModelCatalog(options.env), request.claimFile);
  const run = await runCliProcess({
    binary: launch.binary,
    args: launch.args,
    spawned: launch.adopted,
    stdin: launch.adopted || prompts ? streamJsonPrompt(session.stdin) : session.stdin,
    prompts,
    cwd: workspace.dir,
    env: launch.env,
    reader,
    transcript,
    stallTimeoutMs: stage.stallTimeoutMs,
    firstOutputTimeoutMs: stage.firstOutputTimeoutMs,
    killGraceMs: launch.killGraceMs,
    marker: { name: STAGE_MARKER, value: guard.marker },
    heartbeatIntervalMs: quietHeartbeatIntervalMs(stage),
    signal: request.signal,
    heartbeat: request.heartbeat,
    settleOnResult: settlesOnResult(request) ? (events) => events.result?.is_error === false : undefined,
    onSpawn,
  });
  return { run, reader };
}

/**
 * Whether the adopted warm agent ended before it began on its prompt, so that a cold agent may take it on instead: it
 * wrote nothing at all (its first line, `system/init`, comes before its first model request), left no session file, and
 * was not stopped by the attempt. Such an agent was dead or dying when it was adopted (killed, its stdin closed).
 */
async function diedBeforeItsPrompt(request: BackendRequest, launch: AgentLaunch, run: CliProcessResult): Promise<boolean> {
  if (!launch.adopted || run.stdoutBytes > 0 || run.stoppedFor || run.spawnError || request.signal.aborted) return false;
  return !(await sessionExists(request.workspace.claudeConfigDir, launch.session.sessionId));
}

/** Turns the launch of an adopted agent that died unused into a cold start: a new session, plain stdin, a warning. */
async function startColdInstead(request: BackendRequest, launch: AgentLaunch, run: CliProcessResult): Promise<void> {
  const how = run.exitSignal ? `was killed by ${run.exitSignal}` : `exited with code ${run.exitCode ?? 'unknown'}`;
  launch.warnings.push(`the agent started ahead of time for this stage ${how} before it read its prompt; the stage started cold instead`);
  // What it may have started carries the marker the cold agent takes on: it goes first.
  await stopMarkedProcesses(STAGE_MARKER, launch.guard.marker, 'exact', launch.killGraceMs);
  launch.adopted = undefined;
  launch.session.sessionId = randomUUID();
  launch.args = buildCliArgs(request, launch.session, launch.files);
}

/**
 * Starts the agents of the stages after this one while it works: off the critical path, and never failing this
 * attempt. Resolves to the keys of the processes started.
 */
function prewarmNextStages(request: BackendRequest, options: ClaudeCliOptions, launch: AgentLaunch): Promise<string[]> | undefined {
  const pool = options.warmPool;
  if (!pool || !request.prewarm) return undefined;
  const context = { binary: launch.binary, workerEnv: options.env, killGraceMs: launch.killGraceMs, workspace: request.workspace, mcpServers: request.mcpServers, sandbox: attemptSandbox(options, request.runSignedBy), workspacesRoot: options.workspacesRoot };
  return request
    .prewarm()
    .then((targets) => prewarmStages(pool, targets, context))
    .catch(() => []);
}

/** Maps how the agent's run ended to the attempt's outcome, or throws its failure (or the cancellation). */
async function attemptOutcome(request: BackendRequest, options: ClaudeCliOptions, launch: AgentLaunch, ended: AgentRunEnd): Promise<BackendOutcome> {
  const { stage } = request;
  const { run, reader } = ended;
  request.heartbeat(reader.progress());
  const failure = run.stoppedFor === 'cancelled' || run.stoppedFor === 'decided' || run.spawnError ? undefined : classifyCliRun({ stageId: stage.id, run, reader, stallTimeoutMs: stage.stallTimeoutMs, firstOutputTimeoutMs: stage.firstOutputTimeoutMs });
  if (options.warmPool && ended.prewarming && (run.stoppedFor || run.spawnError || failure)) {
    // The stages after this one will not start now: their waiting agents go at once instead of at their TTL.
    await options.warmPool.discardAll(await ended.prewarming);
  }
  if (run.stoppedFor === 'cancelled') throw request.signal.reason ?? new Error('cancelled');
  if (run.spawnError) {
    throw stageFailure({ type: 'CLI_NOT_INSTALLED', stageId: stage.id, message: `cannot start the Claude Code CLI ${launch.binary} (${run.spawnError})`, details: { binary: launch.binary } });
  }
  if (run.stoppedFor === 'decided' && run.decided) throw stageFailure({ type: run.decided.type, stageId: stage.id, message: `${run.decided.message}; the agent was stopped` });
  if (failure) throw failure;
  const warnings = [...launch.guard.warnings, ...launch.session.warnings, ...launch.warnings];
  return { ...toOutcome(reader, run, ended.durationMs, warnings), warmStart: launch.adopted !== undefined };
}

/** CLI permission modes whose exit code can still turn a successful result into a failure (auto mode's classifier). */
const EXIT_CODE_DECIDES = new Set(['auto', 'plan']);

/**
 * Whether the attempt may complete on the agent's successful result instead of waiting for the process to exit. The
 * CLI then spends about 20 ms on session bookkeeping in its config folder and on its teardown; with stages to follow,
 * that overlaps their scheduling. Only under `bare`, where no SessionEnd hook can still act on the workspace, and not in
 * the permission modes whose exit code decides. The next agent of the run on this worker waits for the exit.
 */
function settlesOnResult(request: BackendRequest): boolean {
  return request.stagesFollow === true && request.stage.bare === true && !EXIT_CODE_DECIDES.has(request.stage.permissionMode ?? 'dontAsk');
}

/** Waits for an agent that settled on its result to exit; an exit that would have failed it is logged, since the stage completed. */
export async function followToExit(stageId: string, exit: Promise<CliProcessResult>, warn: (message: string) => void): Promise<void> {
  try {
    const ended = await exit;
    if (ended.exitCode === 0 && !ended.stoppedFor) return;
    const how = ended.stoppedFor ? `was stopped (${ended.stoppedFor})` : ended.exitSignal ? `was killed by ${ended.exitSignal}` : `exited with code ${ended.exitCode}`;
    const said = ended.stderrTail.trim().split('\n').at(-1);
    warn(`the agent of stage ${stageId} ${how} after its successful result, on which the stage had already completed${said ? `: ${said}` : ''}`);
  } catch (err) {
    warn(`the agent of stage ${stageId} could not be followed to its exit after its result: ${(err as Error).message}`);
  }
}

/**
 * The attempt's logger, taken while the activity runs: its agent may be followed to its exit after the activity
 * completed. Outside an activity (the backend called directly) warnings go to stderr. Either way every message is
 * redacted with the worker's secrets, taken now too: the agent's last stderr line may hold one.
 */
export function attemptWarn(): (message: string) => void {
  const redact = currentRedaction();
  try {
    const { log } = Context.current();
    return (message) => log.warn(redact(message));
  } catch {
    return (message) => process.stderr.write(`${redact(message)}\n`);
  }
}

/** The outcome of a run whose result reported success. */
function toOutcome(reader: CliEventReader, run: CliProcessResult, durationMs: number, earlier: string[]): BackendOutcome {
  const final = reader.result;
  const progress: AttemptProgress = reader.progress();
  const warnings = [...earlier];
  if (reader.failedMcpServers.length > 0) {
    warnings.push(`MCP server(s) ${reader.failedMcpServers.join(', ')} failed to start; the agent ran without them (check their command, args and env)`);
  }
  if (reader.fallback) {
    warnings.push(`the CLI switched from model ${reader.fallback.from} to the fallback ${reader.fallback.to} (${reader.fallback.trigger})`);
  }
  if (run.truncatedAnswerBytes > 0) {
    warnings.push(`the agent's answer came in a ${run.truncatedAnswerBytes}-byte event; only the end of its text was kept for the report (the transcript has all of it)`);
  }
  return redactSecrets({
    text: final?.result ?? reader.lastAssistantText,
    sessionId: final?.session_id ?? reader.sessionId,
    usage: final?.usage
      ? {
          inputTokens: final.usage.input_tokens ?? 0,
          outputTokens: final.usage.output_tokens ?? 0,
          cacheReadTokens: final.usage.cache_read_input_tokens ?? 0,
          cacheWriteTokens: final.usage.cache_creation_input_tokens ?? 0,
        }
      : progress.usage ?? { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
    costUsd: final?.total_cost_usd ?? progress.costUsd,
    numTurns: final?.num_turns ?? progress.turns,
    durationMs: final?.duration_ms ?? durationMs,
    warnings,
    permissionDenials: (final?.permission_denials ?? []).map((d) => ({ tool: d.tool_name, input: d.tool_input })),
  });
}
