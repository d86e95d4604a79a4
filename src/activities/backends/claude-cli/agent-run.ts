import { randomUUID } from 'node:crypto';
import { stageFailure } from '../../failures.js';
import { currentSecretValues } from '../../secrets.js';
import { quietHeartbeatIntervalMs, type BackendRequest } from '../stage-backend.js';
import { workerSecretValues } from './agent-auth.js';
import { asksMidTurn, buildCliArgs, streamJsonPrompt } from './args.js';
import { PromptBridge } from './control-protocol.js';
import { CliEventReader } from './events.js';
import type { CliProcessResult } from './agent-process-options.js';
import { runCliProcess } from './agent-process.js';
import { sessionExists } from './session.js';
import { loadModelCatalog } from '../models.js';
import { STAGE_MARKER } from '../../process/sweep.js';
import { stopMarkedProcesses } from '../../process/stop.js';
import { TranscriptWriter } from './transcript-writer.js';
import { prewarmStages } from './warm-start.js';
import { attemptSandbox, type ClaudeCliOptions } from './backend-options.js';
import type { AgentLaunch } from './agent-launch.js';
import { attemptWarn, followToExit, settlesOnResult, type AgentRunEnd } from './attempt-outcome.js';

/**
 * Runs the agent to its exit (or to its result, when the attempt settles on it) while recording its transcript, then
 * releases the stage: at once, or once an agent that settled on its result has exited. An adopted warm agent that died
 * before it began on its prompt is replaced, once, by a cold one.
 */
export async function runAgent(request: BackendRequest, options: ClaudeCliOptions, launch: AgentLaunch): Promise<AgentRunEnd> {
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
